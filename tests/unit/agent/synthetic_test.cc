// gleaner-train run with the synthetic kind, as a real child process.

#include <signal.h>
#include <sys/wait.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <condition_variable>
#include <map>
#include <mutex>

#include "agent/protocol/checkpoint_dir.h"
#include "agent/protocol/sample_set.h"
#include "agent/protocol/synthetic_chain.h"
#include "agent/protocol/trainer_protocol.h"
#include "agent/supervisor/archive.h"
#include "agent/supervisor/child_process.h"
#include "agent/train/images/decode.h"
#include "shared/job_params.h"
#include "shared/native/files.h"
#include "test_util.h"

using namespace gleaner;
using gleaner::agent::ChildProcess;
using gleaner::testing::TempDir;

namespace {

struct TrainRun {
  int wait_status = 0;
  std::vector<ProgressEvent> events;
  std::string stderr_text;
};

// Runs gleaner-train; on_event may return true to send SIGTERM.
// stop_at > 0: a replay (--stop-at-step).
// RunSpec: the same with a whole SPEC.json.
TrainRun RunSpec(const TempDir& t, const Json& spec, const std::string& resume = "",
                 std::function<bool(const ProgressEvent&)> stop_when = nullptr,
                 int64_t stop_at = 0) {
  REQUIRE(files::WriteDurable(t / "SPEC.json", DumpJson(spec)).ok());
  std::vector<std::string> argv = {testing::TrainBin(), "run",        "--spec",
                                   t / "SPEC.json",     "--work-dir", t / "work"};
  if (!resume.empty()) {
    argv.push_back("--resume");
    argv.push_back(resume);
  }
  if (stop_at > 0) {
    argv.push_back("--stop-at-step");
    argv.push_back(std::to_string(stop_at));
  }
  TrainRun run;
  std::mutex mu;
  ChildProcess* self = nullptr;
  bool signalled = false;
  auto child = ChildProcess::Start(
      argv,
      [&](const std::string& line) {
        auto e = ParseProgressEvent(line);
        if (!e.ok()) return;
        std::lock_guard<std::mutex> lock(mu);
        run.events.push_back(*e);
        if (stop_when && !signalled && self != nullptr && stop_when(*e)) {
          self->Signal(SIGTERM);
          signalled = true;
        }
      },
      [&](const std::string& line) {
        std::lock_guard<std::mutex> lock(mu);
        run.stderr_text += line + "\n";
      });
  REQUIRE(child.ok());
  {
    std::lock_guard<std::mutex> lock(mu);
    self = child->get();
  }
  REQUIRE((*child)->WaitFor(60000, &run.wait_status));
  return run;
}

TrainRun Train(const TempDir& t, const Json& params, const std::string& resume = "",
               std::function<bool(const ProgressEvent&)> stop_when = nullptr, int64_t stop_at = 0) {
  Json spec = {{"job_id", "job-1"}, {"kind", "synthetic"}, {"params", params}};
  return RunSpec(t, spec, resume, std::move(stop_when), stop_at);
}

int ExitCode(const TrainRun& r) {
  return WIFEXITED(r.wait_status) ? WEXITSTATUS(r.wait_status) : -1;
}

std::string Chain(const TempDir& t) {
  auto text = files::ReadAll(t / "work/output/chain.txt");
  return text.ok() ? *text : "<missing>";
}

}  // namespace

TEST_CASE("synthetic chain matches an independent computation", "[synthetic]") {
  // python3: s=sha256(b'7'); for k in 1..20: s=sha256(s+k.to_bytes(8,'little'))
  CHECK(gleaner::SyntheticChainHex(7, 20) ==
        "9e1fd5f5e11aa23a9b1204ebb450528037b48be6097668d61d460095410feebc");
  CHECK(gleaner::SyntheticChainHex(0, 0) == Sha256Hex("0"));
}

TEST_CASE("an uninterrupted run writes chain.txt and its output manifest", "[synthetic]") {
  TempDir t;
  TrainRun r = Train(t, {{"steps", 20}, {"checkpoint_every", 5}, {"seed", 7}});
  CHECK(ExitCode(r) == kExitDone);
  CHECK(Chain(t) == gleaner::SyntheticChainHex(7, 20) + "\n");
  auto out = train::VerifyCheckpointDir(t / "work/output");
  REQUIRE(out.ok());
  CHECK(out->step == 20);
  int checkpoints = 0;
  for (const auto& e : r.events) checkpoints += e.type == ProgressEvent::Type::kCheckpoint;
  CHECK(checkpoints == 4);  // 5, 10, 15 and the last step's, before the output
  CHECK(r.events.back().type == ProgressEvent::Type::kDone);
  // The last step's checkpoint records its export: the output's files, and only it does.
  auto last = train::VerifyCheckpointDir(train::CheckpointDirFor(t / "work", 20));
  REQUIRE(last.ok());
  auto recorded = ManifestOutputs(*last);
  REQUIRE(recorded.ok());
  CHECK(SameFiles(*recorded, out->files));
  auto earlier = train::VerifyCheckpointDir(train::CheckpointDirFor(t / "work", 15));
  REQUIRE(earlier.ok());
  CHECK(ManifestOutputs(*earlier).status().code() == Code::kNotFound);
}

TEST_CASE("resumed at the last step's checkpoint, a run only exports, and checks the export",
          "[synthetic]") {
  TempDir first;
  Json params = {{"steps", 12}, {"checkpoint_every", 5}, {"seed", 9}};
  REQUIRE(ExitCode(Train(first, params)) == kExitDone);
  const std::string final_dir = train::CheckpointDirFor(first / "work", 12);
  TempDir again;
  TrainRun r = Train(again, params, final_dir);
  CHECK(ExitCode(r) == kExitDone);
  CHECK(Chain(again) == Chain(first));
  for (const auto& e : r.events) CHECK(e.type != ProgressEvent::Type::kCheckpoint);
  // A checkpoint whose recorded outputs are not its export (forged, or from another build):
  // the run fails rather than complete with outputs the checkpoint does not name.
  auto m = train::VerifyCheckpointDir(final_dir);
  REQUIRE(m.ok());
  TempDir forged_ckpt;
  const std::string forged_dir = forged_ckpt / "ckpt";
  auto w = train::CheckpointWriter::Begin(forged_dir);
  REQUIRE(w.ok());
  for (const ManifestFile& f : m->files) {
    REQUIRE(w->AddFile(f.name, *files::ReadAll(final_dir + "/" + f.name)).ok());
  }
  Json meta = m->meta;
  meta["outputs"][0]["sha256"] = Sha256Hex("another chain");
  REQUIRE(w->Commit(m->kind, m->job_id, m->step, meta).ok());
  TempDir bad;
  TrainRun refused = Train(bad, params, forged_dir);
  CHECK(ExitCode(refused) == kExitFailed);
  CHECK(refused.stderr_text.find("differs from the outputs it recorded") != std::string::npos);
  CHECK_FALSE(files::Exists(bad / "work/output"));
}

TEST_CASE("resuming from every checkpoint, any number of times, gives the same chain",
          "[synthetic]") {
  TempDir first;
  Json params = {{"steps", 30}, {"checkpoint_every", 4}, {"seed", -12345}};
  REQUIRE(ExitCode(Train(first, params)) == kExitDone);
  std::string want = gleaner::SyntheticChainHex(-12345, 30) + "\n";
  CHECK(Chain(first) == want);
  for (int step : {4, 16, 28}) {
    TempDir t;
    TrainRun r = Train(t, params, train::CheckpointDirFor(first / "work", step));
    CHECK(ExitCode(r) == kExitDone);
    CHECK(Chain(t) == want);
    REQUIRE_FALSE(r.events.empty());
    CHECK(r.events.front().step == step + 1);  // no step trained twice
  }
}

TEST_CASE("SIGTERM: checkpoint at the next step boundary, exit 3, resume finishes the chain",
          "[synthetic]") {
  TempDir t;
  Json params = {{"steps", 100000}, {"step_ms", 2}, {"checkpoint_every", 0}, {"seed", 3}};
  TrainRun r = Train(t, params, "", [](const ProgressEvent& e) {
    return e.type == ProgressEvent::Type::kProgress && e.step >= 5;
  });
  REQUIRE(ExitCode(r) == kExitInterrupted);
  const ProgressEvent& last = r.events.back();
  REQUIRE(last.type == ProgressEvent::Type::kCheckpoint);
  int64_t last_step = 0;
  for (const auto& e : r.events) {
    if (e.type == ProgressEvent::Type::kProgress) last_step = e.step;
  }
  CHECK(last.step == last_step);  // the checkpoint covers the last step trained
  auto m = train::VerifyCheckpointDir(last.dir);
  REQUIRE(m.ok());
  CHECK(m->step == last.step);

  // Resume with fewer total steps so it finishes quickly.
  TempDir t2;
  Json params2 = {{"steps", last.step + 10}, {"seed", 3}};
  TrainRun r2 = Train(t2, params2, last.dir);
  CHECK(ExitCode(r2) == kExitDone);
  CHECK(Chain(t2) == gleaner::SyntheticChainHex(3, last.step + 10) + "\n");
}

TEST_CASE("fail_at_step exits as failed with a reason, crash_at_step aborts", "[synthetic]") {
  TempDir t;
  TrainRun f = Train(t, {{"steps", 10}, {"fail_at_step", 4}, {"checkpoint_every", 2}});
  CHECK(ExitCode(f) == kExitFailed);
  REQUIRE(f.events.back().type == ProgressEvent::Type::kError);
  CHECK(f.events.back().reason.find("fail_at_step 4") != std::string::npos);

  TempDir t2;
  TrainRun c = Train(t2, {{"steps", 10}, {"crash_at_step", 6}, {"checkpoint_every", 5}});
  CHECK(WIFSIGNALED(c.wait_status));
  CHECK(WTERMSIG(c.wait_status) == SIGABRT);
  CHECK(train::LatestCheckpointDir(t2 / "work") == train::CheckpointDirFor(t2 / "work", 5));
}

TEST_CASE("bad specs and bad resume checkpoints are clear failures", "[synthetic]") {
  TempDir t;
  // A spec TrainerSpec refuses is the agent's fault (it checks specs before it writes them):
  // exit 64, as for a bad command line.
  TrainRun r = Train(t, {{"steps", -1}});
  CHECK(ExitCode(r) == kExitUsage);
  CHECK(r.stderr_text.find("params.steps") != std::string::npos);
  TempDir t1;
  TrainRun bad_param = Train(t1, {{"steps", 4}, {"checkpoint_every", -2}});
  CHECK(ExitCode(bad_param) == kExitFailed);

  TempDir src;
  REQUIRE(ExitCode(Train(src, {{"steps", 6}, {"checkpoint_every", 3}, {"seed", 1}})) == 0);
  std::string ckpt = train::CheckpointDirFor(src / "work", 3);
  TempDir t2;
  TrainRun wrong_seed = Train(t2, {{"steps", 6}, {"seed", 2}}, ckpt);
  CHECK(ExitCode(wrong_seed) == kExitFailed);
  REQUIRE(files::WriteSynced(ckpt + "/state.json", "{}").ok());
  TempDir t3;
  TrainRun corrupt = Train(t3, {{"steps", 6}, {"seed", 1}}, ckpt);
  CHECK(ExitCode(corrupt) == kExitFailed);
  CHECK(corrupt.stderr_text.find("cannot resume") != std::string::npos);

  // Usage errors.
  std::vector<std::string> argv = {testing::TrainBin(), "run", "--spec"};
  auto child = ChildProcess::Start(argv, nullptr, nullptr);
  REQUIRE(child.ok());
  int st = 0;
  REQUIRE((*child)->WaitFor(10000, &st));
  CHECK(WEXITSTATUS(st) == kExitUsage);
}

namespace {

Json SampleParams(int64_t sample_ms = 0) {
  auto p = NormalizeParams("synthetic", {{"steps", 20},
                                         {"checkpoint_every", 5},
                                         {"seed", 7},
                                         {"sample_ms", sample_ms},
                                         {"sample_prompts", Json::array({"a cat", "a dog"})},
                                         {"sample_every", 8},
                                         {"sample_resolution", 24}});
  REQUIRE(p.ok());
  return *p;
}

// step -> the bytes of each image, for every published sample directory of a run.
std::map<int64_t, std::vector<std::string>> Samples(const TempDir& t) {
  std::map<int64_t, std::vector<std::string>> out;
  for (int64_t step : {8, 16, 20}) {
    std::string dir = train::SampleDirFor(t / "work", step);
    auto set = train::VerifySampleDir(dir);
    if (!set.ok()) continue;
    for (int i = 0; i < int(set->prompts.size()); ++i) {
      auto png = files::ReadAll(files::Join(dir, train::SampleImageName(i)));
      REQUIRE(png.ok());
      out[step].push_back(*png);
    }
  }
  return out;
}

}  // namespace

TEST_CASE("samples: at every sample_every-th step and the last, after a checkpoint, real PNGs",
          "[synthetic][samples]") {
  TempDir t;
  TrainRun r = Train(t, SampleParams());
  INFO(r.stderr_text);
  REQUIRE(ExitCode(r) == kExitDone);
  std::vector<int64_t> sampled, checkpoints;
  for (const auto& e : r.events) {
    if (e.type == ProgressEvent::Type::kCheckpoint) checkpoints.push_back(e.step);
    if (e.type == ProgressEvent::Type::kSamples) {
      // The checkpoint of that step is already durable.
      CHECK(train::VerifyCheckpointDir(train::CheckpointDirFor(t / "work", e.step)).ok());
      CHECK(e.seconds >= 0);
      sampled.push_back(e.step);
    }
  }
  CHECK(sampled == std::vector<int64_t>{8, 16, 20});
  CHECK(checkpoints == std::vector<int64_t>{5, 8, 10, 15, 16, 20});
  auto set = train::VerifySampleDir(train::SampleDirFor(t / "work", 16));
  REQUIRE(set.ok());
  CHECK(set->step == 16);
  CHECK(set->seed == 7);
  CHECK(set->resolution == 24);
  REQUIRE(set->prompts.size() == 2);
  CHECK(set->prompts[1].prompt == "a dog");
  auto s = Samples(t);
  REQUIRE(s.size() == 3);
  for (const auto& [step, pngs] : s) {
    for (const std::string& png : pngs) {
      auto img = images::DecodeImage(png);
      REQUIRE(img.ok());
      CHECK(img->width == 24);
      CHECK(img->height == 24);
    }
    CHECK(pngs[0] != pngs[1]);  // the prompt matters
  }
  CHECK(s[8][0] != s[16][0]);  // the weights (chain state) matter
  CHECK(Chain(t) == gleaner::SyntheticChainHex(7, 20) + "\n");
}

TEST_CASE("samples: byte-identical when re-run, and when resumed from any checkpoint",
          "[synthetic][samples]") {
  TempDir a;
  REQUIRE(ExitCode(Train(a, SampleParams())) == kExitDone);
  const auto reference = Samples(a);
  REQUIRE(reference.size() == 3);
  TempDir again;
  REQUIRE(ExitCode(Train(again, SampleParams())) == kExitDone);
  CHECK(Samples(again) == reference);
  for (int64_t from : {5, 8, 16}) {
    INFO("resume from " << from);
    TempDir t;
    std::string resume = train::CheckpointDirFor(a / "work", from);
    TrainRun r = Train(t, SampleParams(), resume);
    INFO(r.stderr_text);
    REQUIRE(ExitCode(r) == kExitDone);
    auto got = Samples(t);
    for (const auto& [step, pngs] : got) CHECK(pngs == reference.at(step));
    // A resume from a sampling step renders that step again; earlier steps are not.
    CHECK(got.count(8) == (from <= 8 ? 1u : 0u));
    CHECK(got.count(16) == 1u);
  }
}

TEST_CASE("samples: SIGTERM while sampling keeps the checkpoint, publishes no partial set",
          "[synthetic][samples]") {
  TempDir t;
  // 300 ms per image: the signal lands while step 8's images are being rendered.
  TrainRun r = Train(t, SampleParams(300), "", [](const ProgressEvent& e) {
    return e.type == ProgressEvent::Type::kCheckpoint && e.step == 8;
  });
  INFO(r.stderr_text);
  REQUIRE(ExitCode(r) == kExitInterrupted);
  for (const auto& e : r.events) CHECK(e.type != ProgressEvent::Type::kSamples);
  auto ckpt = train::VerifyCheckpointDir(train::CheckpointDirFor(t / "work", 8));
  REQUIRE(ckpt.ok());
  CHECK(train::LatestCheckpointDir(t / "work") == train::CheckpointDirFor(t / "work", 8));
  CHECK_FALSE(files::Exists(train::SampleDirFor(t / "work", 8)));
  // Resumed from that checkpoint, the trainer renders step 8's samples first.
  TempDir ref;
  REQUIRE(ExitCode(Train(ref, SampleParams())) == kExitDone);
  TempDir resumed;
  TrainRun rr = Train(resumed, SampleParams(), train::CheckpointDirFor(t / "work", 8));
  INFO(rr.stderr_text);
  REQUIRE(ExitCode(rr) == kExitDone);
  CHECK(Samples(resumed) == Samples(ref));
}

namespace {

// The sha256 of a checkpoint directory packed as the agent uploads it (what a verification
// compares), after checking it holds `step`.
std::string PackedSha(const std::string& dir, const TempDir& scratch, int64_t step) {
  auto m = agent::PackCheckpoint(dir, scratch / "packed.gckpt");
  REQUIRE(m.ok());
  CHECK(m->step == step);
  auto d = files::Digest(scratch / "packed.gckpt");
  REQUIRE(d.ok());
  return d->sha256;
}

}  // namespace

TEST_CASE("a replay (--stop-at-step): the checkpoint of that step, as a full run wrote it",
          "[synthetic][replay]") {
  TempDir full;
  Json params = {{"steps", 20}, {"checkpoint_every", 5}, {"seed", 7}};
  REQUIRE(ExitCode(Train(full, params)) == kExitDone);
  // On the schedule: from the checkpoint before it, and from scratch.
  for (const std::string& from : {train::CheckpointDirFor(full / "work", 5), std::string()}) {
    INFO("from '" << from << "'");
    TempDir t;
    TrainRun r = Train(t, params, from, nullptr, 10);
    CHECK(ExitCode(r) == kExitDone);
    CHECK_FALSE(files::Exists(t / "work/output"));
    CHECK(PackedSha(train::CheckpointDirFor(t / "work", 10), t, 10) ==
          PackedSha(train::CheckpointDirFor(full / "work", 10), t, 10));
    REQUIRE_FALSE(r.events.empty());
    CHECK(r.events.back().type == ProgressEvent::Type::kCheckpoint);
    CHECK(r.events.back().step == 10);
  }
  // The last segment: the checkpoint of the last step as the full run wrote it (its recorded
  // export included), and the output too, byte-equal.
  TempDir last;
  REQUIRE(ExitCode(Train(last, params, train::CheckpointDirFor(full / "work", 15), nullptr, 20)) ==
          kExitDone);
  CHECK(PackedSha(train::CheckpointDirFor(last / "work", 20), last, 20) ==
        PackedSha(train::CheckpointDirFor(full / "work", 20), last, 20));
  CHECK(Chain(last) == Chain(full));
  // Beyond the job, or not after the resume point: the job's fault, exit 2.
  TempDir bad;
  CHECK(ExitCode(Train(bad, params, "", nullptr, 21)) == kExitFailed);
  CHECK(ExitCode(Train(bad, params, train::CheckpointDirFor(full / "work", 10), nullptr, 10)) ==
        kExitFailed);
}

TEST_CASE("a replay (--stop-at-step) off the schedule equals the checkpoint a SIGTERM wrote",
          "[synthetic][replay]") {
  TempDir t;
  Json params = {{"steps", 100000}, {"step_ms", 2}, {"checkpoint_every", 7}, {"seed", 3}};
  TrainRun r = Train(t, params, "", [](const ProgressEvent& e) {
    return e.type == ProgressEvent::Type::kProgress && e.step >= 9;
  });
  REQUIRE(ExitCode(r) == kExitInterrupted);
  const ProgressEvent& stopped = r.events.back();
  REQUIRE(stopped.type == ProgressEvent::Type::kCheckpoint);
  // Replayed from the scheduled checkpoint before it: the same bytes.
  TempDir replay;
  const int64_t from = stopped.step / 7 * 7;
  TrainRun rr = Train(replay, params, from > 0 ? train::CheckpointDirFor(t / "work", from) : "",
                      nullptr, stopped.step);
  REQUIRE(ExitCode(rr) == kExitDone);
  CHECK(PackedSha(train::CheckpointDirFor(replay / "work", stopped.step), replay, stopped.step) ==
        PackedSha(stopped.dir, replay, stopped.step));
}

TEST_CASE("gleaner-train reads SPEC.json as TrainerSpec: steps, resume and stop step from it",
          "[synthetic][spec]") {
  // steps at the top level only: the kind sees them (the one owner of the job's length).
  TempDir a;
  Json spec = {{"job_id", "job-1"},
               {"kind", "synthetic"},
               {"steps", 8},
               {"params", {{"checkpoint_every", 4}, {"seed", 3}}}};
  REQUIRE(ExitCode(RunSpec(a, spec)) == kExitDone);
  CHECK(Chain(a) == gleaner::SyntheticChainHex(3, 8) + "\n");
  // Resume and a replay's stop step given by the spec alone, without the flags.
  TempDir b;
  Json resumed = spec;
  resumed["resume"] = {{"dir", train::CheckpointDirFor(a / "work", 4)}, {"step", 4}};
  REQUIRE(ExitCode(RunSpec(b, resumed)) == kExitDone);
  CHECK(Chain(b) == Chain(a));
  TempDir c;
  Json replay = spec;
  replay["stop_at_step"] = 4;
  REQUIRE(ExitCode(RunSpec(c, replay)) == kExitDone);
  CHECK(train::LatestCheckpointDir(c / "work") == train::CheckpointDirFor(c / "work", 4));
  CHECK_FALSE(files::Exists(c / "work/output/chain.txt"));
  // A flag that contradicts the spec, and a spec TrainerSpec refuses: exit 64 (usage) with one
  // line naming the field.
  TempDir d;
  TrainRun contradict = RunSpec(d, replay, "", nullptr, 3);
  CHECK(ExitCode(contradict) == kExitUsage);
  CHECK(contradict.stderr_text.find("--stop-at-step 3 differs from spec.stop_at_step 4") !=
        std::string::npos);
  Json bad = spec;
  bad["params"]["steps"] = 9;
  TrainRun refused = RunSpec(d, bad);
  CHECK(ExitCode(refused) == kExitUsage);
  CHECK(refused.stderr_text.find("spec.params.steps (9) differs from spec.steps (8)") !=
        std::string::npos);
  bad = spec;
  bad["colour"] = "blue";
  refused = RunSpec(d, bad);
  CHECK(ExitCode(refused) == kExitUsage);
  CHECK(refused.stderr_text.find("colour") != std::string::npos);
}
