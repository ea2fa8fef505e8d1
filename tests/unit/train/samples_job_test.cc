// lora-sd jobs with sample_prompts on a tiny generated diffusers model, through the real
// gleaner-train binary: PNGs at the due steps, the same bytes when re-run and when resumed after
// a SIGTERM, a SIGTERM during sampling keeps the checkpoint it followed, and a job without a
// diffusers model is refused at start.
#include <signal.h>

#include "agent/protocol/checkpoint_dir.h"
#include "agent/protocol/sample_set.h"
#include "agent/train/images/decode.h"
#include "agent/train/models/loader/tiny_diffusers_model.h"
#include "train_test_util.h"

namespace gleaner::train::testing {
namespace {

struct SampleJob {
  TempDir tmp;
  std::string spec_path = tmp / "SPEC.json";

  explicit SampleJob(Json params) {
    REQUIRE(models::WriteTinyDiffusersModel(tmp / "model", false, 7).ok());
    MakeDatasetOptions o;
    o.n = 4;
    o.size = 8;
    o.tokens = 4;
    o.dim = 32;
    o.seed = 3;
    Result<std::string> d = MakeDataset(o);
    REQUIRE(d.ok());
    REQUIRE(WriteFileDurable(tmp / "data.safetensors", *d).ok());
    Json spec = {{"job_id", "job-s"},
                 {"kind", "lora-sd"},
                 {"params", std::move(params)},
                 {"model", {{"format", "diffusers"}}},
                 {"inputs", {{"model", tmp / "model"}, {"dataset", tmp / "data.safetensors"}}}};
    REQUIRE(WriteFileDurable(spec_path, spec.dump()).ok());
  }
};

struct BinRun {
  int code = -1;
  std::string out;  // stdout: the progress protocol
};

// Runs `gleaner-train run`; when `kill_at` is given, sends SIGTERM as soon as stdout holds it.
BinRun RunJob(const std::string& spec, const std::string& work, const std::string& resume = "",
              const std::string& kill_at = "") {
  int out[2];
  REQUIRE(::pipe(out) == 0);
  std::string bin = std::string(GLEANER_BIN_DIR) + "/gleaner-train";
  std::vector<std::string> args = {bin, "run", "--spec", spec, "--work-dir", work};
  if (!resume.empty()) {
    args.push_back("--resume");
    args.push_back(resume);
  }
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(out[1], 1);
    ::close(out[0]);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(bin.c_str(), argv.data());
    ::_exit(127);
  }
  ::close(out[1]);
  BinRun r;
  bool killed = false;
  char buf[4096];
  for (ssize_t n; (n = ::read(out[0], buf, sizeof buf)) > 0;) {
    r.out.append(buf, size_t(n));
    if (!killed && !kill_at.empty() && r.out.find(kill_at) != std::string::npos) {
      ::kill(pid, SIGTERM);
      killed = true;
    }
  }
  ::close(out[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  return r;
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// Every PNG of a work dir's sample sets, by "<step>/<i>.png".
std::map<std::string, std::string> SamplePngs(const std::string& work, int64_t steps) {
  std::map<std::string, std::string> out;
  for (int64_t step = 1; step <= steps; ++step) {
    std::string dir = SampleDirFor(work, step);
    if (!Exists(dir)) continue;
    Result<SampleSet> set = VerifySampleDir(dir);
    REQUIRE(set.ok());
    for (int i = 0; i < int(set->prompts.size()); ++i) {
      out[std::to_string(step) + "/" + SampleImageName(i)] = Bytes(dir + "/" + SampleImageName(i));
    }
  }
  return out;
}

Json Params(int64_t sample_steps, Json prompts) {
  return Json{{"steps", 6},
              {"checkpoint_every", 2},
              {"rank", 2},
              {"learning_rate", 1e-2},
              {"sample_prompts", std::move(prompts)},
              {"sample_every", 3},
              {"sample_steps", sample_steps},
              {"guidance_scale", 4.0},
              {"sample_seed", 5},
              {"sample_resolution", 16}};
}

}  // namespace

TEST_CASE("lora-sd samples: PNGs at the due steps with the same bytes re-run and resumed",
          "[lora_sd][samples][signal]") {
  SampleJob job(Params(3, {"a red fox", {{"prompt", "a cat"}, {"negative_prompt", "blurry"}}}));
  const std::string a = job.tmp / "a", b = job.tmp / "b", c = job.tmp / "c";
  BinRun first = RunJob(job.spec_path, a);
  INFO(first.out);
  REQUIRE(first.code == kExitDone);
  std::map<std::string, std::string> pngs = SamplePngs(a, 6);
  CHECK(pngs.size() == 4);  // steps 3 and 6, two prompts each
  for (const char* k : {"3/0.png", "3/1.png", "6/0.png", "6/1.png"}) {
    INFO(k);
    REQUIRE(pngs.count(k));
    Result<images::Image> img = images::DecodeImage(pngs[k]);
    REQUIRE(img.ok());
    CHECK(img->width == 16);
    CHECK(img->height == 16);
  }
  CHECK(pngs["3/0.png"] != pngs["6/0.png"]);  // the LoRA changed between the steps
  CHECK(pngs["6/0.png"] != pngs["6/1.png"]);
  Result<SampleSet> set = VerifySampleDir(SampleDirFor(a, 6));
  REQUIRE(set.ok());
  CHECK(set->prompts[1].negative_prompt == "blurry");
  CHECK(set->seed == 5);
  // Sampling time is reported apart, after the step's checkpoint.
  size_t ckpt = first.out.find("gleaner checkpoint step=3 ");
  size_t samples = first.out.find("gleaner samples step=3 ");
  CHECK(ckpt != std::string::npos);
  CHECK(samples != std::string::npos);
  CHECK(ckpt < samples);
  CHECK(first.out.find(" seconds=", samples) != std::string::npos);
  CHECK(VerifyCheckpointDir(CheckpointDirFor(a, 6)).ok());  // the final step's, before sampling

  // Re-run: the same bytes.
  REQUIRE(RunJob(job.spec_path, b).code == kExitDone);
  CHECK(SamplePngs(b, 6) == pngs);
  CHECK(Bytes(OutputDirFor(b) + "/lora.safetensors") ==
        Bytes(OutputDirFor(a) + "/lora.safetensors"));

  // SIGTERM as the step-3 checkpoint is announced (so while its samples render), then resume.
  BinRun stopped = RunJob(job.spec_path, c, "", "gleaner checkpoint step=3 ");
  INFO(stopped.out);
  REQUIRE(stopped.code == kExitInterrupted);
  std::string ckpt_dir = LatestCheckpointDir(c);
  REQUIRE(VerifyCheckpointDir(ckpt_dir).ok());
  BinRun resumed = RunJob(job.spec_path, c, ckpt_dir);
  INFO(resumed.out);
  REQUIRE(resumed.code == kExitDone);
  CHECK(SamplePngs(c, 6) == pngs);
  CHECK(Bytes(OutputDirFor(c) + "/lora.safetensors") ==
        Bytes(OutputDirFor(a) + "/lora.safetensors"));
}

TEST_CASE("lora-sd samples: SIGTERM while sampling keeps the checkpoint it followed",
          "[lora_sd][samples][signal]") {
  // Long sampling (8 prompts of 1000 steps), so the signal lands in it.
  Json prompts = Json::array();
  for (int i = 0; i < 8; ++i) prompts.push_back("prompt " + std::to_string(i));
  SampleJob job(Params(1000, prompts));
  const std::string work = job.tmp / "w";
  BinRun r = RunJob(job.spec_path, work, "", "gleaner checkpoint step=3 ");
  INFO(r.out);
  REQUIRE(r.code == kExitInterrupted);
  Result<CheckpointManifest> m = VerifyCheckpointDir(CheckpointDirFor(work, 3));
  REQUIRE(m.ok());
  CHECK(m->step == 3);
  CHECK(LatestCheckpointDir(work) == CheckpointDirFor(work, 3));
  CHECK_FALSE(Exists(SampleDirFor(work, 3)));  // abandoned, never published
  CHECK(r.out.find("gleaner samples") == std::string::npos);
}

TEST_CASE("lora-sd samples need a diffusers model: refused at start with one line",
          "[lora_sd][samples]") {
  TinyJob job(4);
  Json spec = job.Spec(Params(3, {"a red fox"}));
  const std::string spec_path = job.tmp / "SPEC.json", work = job.tmp / "w";
  REQUIRE(WriteFileDurable(spec_path, spec.dump()).ok());
  BinRun r = RunJob(spec_path, work);
  INFO(r.out);
  CHECK(r.code == kExitFailed);
  CHECK(r.out.find("gleaner error reason=sample_prompts%20need%20a%20diffusers%20model") !=
        std::string::npos);
  CHECK(r.out.find("gleaner progress") == std::string::npos);  // no step was trained
}

}  // namespace gleaner::train::testing
