#include "agent/train/jobs/synthetic/synthetic.h"

#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <map>

#include "agent/protocol/checkpoint_dir.h"
#include "agent/protocol/progress.h"
#include "agent/protocol/sample_set.h"
#include "agent/protocol/synthetic_chain.h"
#include "agent/protocol/trainer_protocol.h"
#include "agent/train/common/run_args.h"
#include "agent/train/common/signals.h"
#include "agent/train/images/png_encode.h"
#include "shared/native/files.h"

namespace gleaner::train {
namespace {

constexpr const char* kKind = "synthetic";
constexpr const char* kStateFile = "state.json";

struct Params {
  int64_t steps = 0, step_ms = 0, checkpoint_every = 0, seed = 0;
  int64_t fail_at_step = -1, crash_at_step = -1;
  bool node_fault = false;  // fail_at_step came from the test hook: a node's fault, not the job's
  int64_t sample_ms = 0;
  bool samples = false;
  SampleSet sample_set;  // the job's sample params, when samples
  int64_t sample_every = 0;
};

Result<Params> ReadParams(const Json& j) {
  Params p;
  FieldReader r(j, "params.");
  r.Int("steps", &p.steps, true, 1, 10000000);
  r.Int("step_ms", &p.step_ms, false, 0, 600000);
  r.Int("checkpoint_every", &p.checkpoint_every, false, 0, 10000000);
  r.Int("seed", &p.seed, false, INT64_MIN, INT64_MAX);
  r.Int("fail_at_step", &p.fail_at_step, false, 0, 10000000);
  r.Int("crash_at_step", &p.crash_at_step, false, 0, 10000000);
  r.Int("sample_ms", &p.sample_ms, false, 0, 600000);
  r.Int("sample_every", &p.sample_every, false, 0, 10000000);
  if (!r.ok()) return r.status();
  Result<SampleSet> set = SampleSetFromParams(j);
  if (set.ok()) {
    p.samples = true;
    p.sample_set = *set;
  } else if (set.status().code() != Code::kNotFound) {
    return set.status();
  }
  // Test hook: a node whose trainers fail (a "bad GPU"), so tests can watch a job move on.
  const char* env = std::getenv("GLEANER_SYNTHETIC_FAIL_AT_STEP");
  if (env != nullptr && *env != '\0') {
    p.fail_at_step = std::atoll(env);
    p.node_fault = true;
  }
  return p;
}

struct State {
  int64_t step = 0;
  Digest s{};
};

Result<State> LoadResume(const std::string& dir, const Params& p) {
  Result<CheckpointManifest> m = VerifyCheckpointDir(dir);
  if (!m.ok()) return m.status();
  if (m->kind != kKind) return Status::Corruption("checkpoint is of kind " + m->kind);
  Result<std::string> text = files::ReadAll(files::Join(dir, kStateFile), 1 << 16);
  if (!text.ok()) return text.status();
  Result<Json> j = ParseJson(*text);
  if (!j.ok()) return Status::Corruption("state.json: " + j.status().message());
  FieldReader r(*j, "state.");
  int64_t seed = 0;
  State st;
  std::string hex, raw;
  r.Int("seed", &seed, true, INT64_MIN, INT64_MAX);
  r.Int("step", &st.step, true, 0, p.steps);
  r.String("state", &hex, true, 64);
  if (!r.ok()) return Status::Corruption(r.status().message());
  if (seed != p.seed) return Status::Corruption("checkpoint seed differs from the job's seed");
  if (st.step != m->step) return Status::Corruption("state step differs from the manifest step");
  if (!IsSha256Hex(hex) || !HexDecode(hex, &raw)) return Status::Corruption("bad state digest");
  std::copy(raw.begin(), raw.end(), st.s.begin());
  return st;
}

// The output files: the export of a state (the chain digest).
std::map<std::string, std::string> ExportFiles(const State& st) {
  return {{"chain.txt", HexEncode(st.s) + "\n"}};
}

// The checkpoint of the last step records its export (trainer_protocol.h, meta.outputs).
Status WriteCheckpoint(const RunArgs& args, const Params& p, const State& st) {
  std::string dir = CheckpointDirFor(args.work_dir, st.step);
  Result<CheckpointWriter> w = CheckpointWriter::Begin(dir);
  if (!w.ok()) return w.status();
  Json state = {{"seed", p.seed}, {"step", st.step}, {"state", HexEncode(st.s)}};
  GLEANER_RETURN_IF_ERROR(w->AddFile(kStateFile, DumpJson(state)));
  Json meta = Json::object();
  if (st.step == p.steps) {
    meta[kManifestOutputsKey] = FileListToJson(DescribeFiles(ExportFiles(st)));
  }
  GLEANER_RETURN_IF_ERROR(w->Commit(kKind, args.spec.job_id, st.step, meta));
  EmitCheckpoint(st.step, dir);
  return Status::Ok();
}

double NowS() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

void SleepMs(int64_t ms);

// Image i of step st.step: a pattern drawn from SHA-256 of the chain state, the sample seed,
// the index and the prompts, so it changes with every input and never with the run.
images::Image RenderSample(const State& st, const SampleSet& set, int i) {
  Sha256 h;
  std::string head = HexEncode(st.s) + "|" + std::to_string(set.seed) + "|" + std::to_string(i) +
                     "|" + set.prompts[size_t(i)].prompt + "|" +
                     set.prompts[size_t(i)].negative_prompt;
  h.Update(head.data(), head.size());
  const Digest d = h.Finish();
  const int n = int(set.resolution);
  images::Image img(n, n);
  for (int y = 0; y < n; ++y) {
    for (int x = 0; x < n; ++x) {
      uint8_t* px = img.pixel(x, y);
      const int cell = ((x * 8 / n) + (y * 8 / n) * 8) % 32;
      px[0] = uint8_t(d[0] + x * (d[1] | 1) / n * 32 + d[size_t(cell)] / 4);
      px[1] = uint8_t(d[2] + y * (d[3] | 1) / n * 32);
      px[2] = uint8_t(d[4] + (x + y) * (d[5] | 1) / n * 16);
    }
  }
  return img;
}

// Renders, writes and announces the samples of st.step. *stopped when a stop was requested
// meanwhile: the set is abandoned (never published).
Status WriteSamples(const RunArgs& args, const Params& p, const State& st, bool* stopped) {
  const double start = NowS();
  SampleSet set = p.sample_set;
  set.step = st.step;
  std::vector<std::string> pngs;
  for (int i = 0; i < int(set.prompts.size()); ++i) {
    if ((*stopped = StopRequested())) return Status::Ok();
    SleepMs(p.sample_ms);
    Result<std::string> png = images::EncodePng(RenderSample(st, set, i));
    if (!png.ok()) return png.status();
    pngs.push_back(std::move(png).value());
  }
  if ((*stopped = StopRequested())) return Status::Ok();
  set.seconds = NowS() - start;
  std::string dir = SampleDirFor(args.work_dir, st.step);
  GLEANER_RETURN_IF_ERROR(WriteSampleSet(dir, kKind, args.spec.job_id, set, pngs));
  EmitSamples(st.step, dir, set.seconds);
  return Status::Ok();
}

void SleepMs(int64_t ms) {
  if (ms <= 0) return;
  struct timespec ts = {time_t(ms / 1000), long(ms % 1000) * 1000000L};
  nanosleep(&ts, nullptr);  // a stop signal cuts the step short; that is fine
}

int Fail(const std::string& reason) {
  EmitError(reason);
  std::fprintf(stderr, "gleaner-train: %s\n", reason.c_str());
  return kExitFailed;
}

}  // namespace

int RunSynthetic(const RunArgs& args) {
  Result<Params> params = ReadParams(KindParams(args));
  if (!params.ok()) return Fail(params.status().message());
  Params& p = *params;
  // A replay (--stop-at-step) trains to `end`, checkpoints there and renders no samples.
  const bool replay = args.stop_at_step > 0;
  const int64_t end = replay ? args.stop_at_step : p.steps;
  if (end > p.steps) return Fail("--stop-at-step is beyond the job's steps");
  if (replay) p.samples = false;
  State st;
  st.s = SyntheticChainSeed(p.seed);
  if (!args.resume_dir.empty()) {
    Result<State> resumed = LoadResume(args.resume_dir, p);
    if (!resumed.ok()) return Fail("cannot resume: " + resumed.status().message());
    st = *resumed;
    if (replay && st.step >= end) return Fail("resumed at or past --stop-at-step");
    std::fprintf(stderr, "gleaner-train: synthetic resumed at step %lld\n",
                 static_cast<long long>(st.step));
  }
  int64_t last_ckpt = st.step;
  bool trained_last = false;  // else resumed at the last step: the export is checked
  // Samples due at the step we resumed from were perhaps never finished: render them again.
  bool sampled =
      !(p.samples && !args.resume_dir.empty() && SampleDue(st.step, p.steps, p.sample_every));
  while (st.step < end || !sampled) {
    if (!sampled) {  // the checkpoint of st.step is durable: now its samples
      bool stopped = false;
      Status s = WriteSamples(args, p, st, &stopped);
      if (!s.ok()) return Fail("samples: " + s.message());
      if (stopped) break;
      sampled = true;
      continue;
    }
    if (StopRequested()) break;
    int64_t k = st.step + 1;
    if (k == p.crash_at_step) {
      std::fprintf(stderr, "gleaner-train: crash_at_step %lld reached\n",
                   static_cast<long long>(k));
      std::fflush(stderr);
      std::abort();
    }
    if (k == p.fail_at_step && p.node_fault) {
      // Not the job's fault: an exit code outside the protocol's (the agent reports a node fault).
      std::fprintf(stderr, "gleaner-train: fail_at_step %lld reached (node fault)\n",
                   static_cast<long long>(k));
      return 1;
    }
    if (k == p.fail_at_step) return Fail("fail_at_step " + std::to_string(k) + " reached");
    SleepMs(p.step_ms);
    st.s = SyntheticChainNext(st.s, k);
    st.step = k;
    EmitStep(k, p.steps, 1.0 / double(k), true, p.step_ms > 0 ? 1000.0 / double(p.step_ms) : 0);
    sampled = !(p.samples && SampleDue(k, p.steps, p.sample_every));
    trained_last = k == p.steps;
    if (trained_last || (p.checkpoint_every > 0 && k % p.checkpoint_every == 0) || !sampled) {
      Status s = WriteCheckpoint(args, p, st);
      if (!s.ok()) return Fail("checkpoint: " + s.message());
      last_ckpt = k;
    }
  }
  if (st.step < end || !sampled) {  // stop requested
    if (last_ckpt != st.step || !args.resume_dir.empty() || st.step == 0) {
      Status s = WriteCheckpoint(args, p, st);
      if (!s.ok()) return Fail("checkpoint: " + s.message());
    }
    std::fprintf(stderr, "gleaner-train: stopped at step %lld\n", static_cast<long long>(st.step));
    return kExitInterrupted;
  }
  if (replay && end < p.steps) {  // the checkpoint of `end`, unless the schedule wrote it
    if (last_ckpt != st.step) {
      Status s = WriteCheckpoint(args, p, st);
      if (!s.ok()) return Fail("checkpoint: " + s.message());
    }
    return kExitDone;
  }
  // The last step's checkpoint is durable (written above, or resumed from): its export.
  const std::map<std::string, std::string> files = ExportFiles(st);
  if (!trained_last) {
    Status s = CheckResumedExport(args.resume_dir, DescribeFiles(files));
    if (!s.ok()) return Fail("export: " + s.message());
  }
  Result<CheckpointWriter> out = CheckpointWriter::Begin(OutputDirFor(args.work_dir));
  if (!out.ok()) return Fail("output: " + out.status().message());
  Status s = Status::Ok();
  for (const auto& [name, bytes] : files) {
    if (s.ok()) s = out->AddFile(name, bytes);
  }
  if (s.ok()) s = out->Commit(kKind, args.spec.job_id, st.step);
  if (!s.ok()) return Fail("output: " + s.message());
  EmitDone(st.step);
  return kExitDone;
}

}  // namespace gleaner::train
