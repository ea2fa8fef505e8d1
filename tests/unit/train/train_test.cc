// lora-sd training: determinism and byte-identical resume, loss decrease, outputs, failures,
// and the real gleaner-train binary (make-dataset, forward, SIGTERM + resume).
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "agent/protocol/checkpoint_dir.h"
#include "agent/protocol/trainer_protocol.h"
#include "agent/train/jobs/kinds.h"
#include "agent/train/nn/torch_env.h"
#include "agent/train/training/dataset.h"
#include "agent/train/training/trainer.h"
#include "tests/scoped_env.h"
#include "train_test_util.h"  // Catch2, via the CHECK fix-up

using namespace gleaner;
using namespace gleaner::train;
using namespace gleaner::train::testing;

namespace {

void CheckResumeIsExact(bool sdxl) {
  TinyJob job(8, /*prior=*/true, sdxl);
  // Every stateful feature on: accumulation, warmup + cosine, clipping, prior, min-SNR,
  // noise offset, v-prediction, gradient checkpointing.
  Json params = {{"steps", 20},
                 {"batch_size", 2},
                 {"rank", 4},
                 {"alpha", 8},
                 {"learning_rate", 1e-3},
                 {"checkpoint_every", 10},
                 {"gradient_accumulation", 2},
                 {"lr_scheduler", "cosine"},
                 {"warmup_steps", 3},
                 {"max_grad_norm", 0.5},
                 {"prior_loss_weight", 0.5},
                 {"snr_gamma", 5.0},
                 {"noise_offset", 0.05},
                 {"prediction_type", "v_prediction"},
                 {"gradient_checkpointing", true},
                 {"seed", 42}};
  std::string a = job.tmp / "a", b = job.tmp / "b";
  REQUIRE(job.Run(job.Spec(params), a) == kExitDone);
  std::string ckpt = CheckpointDirFor(a, 10);
  Result<CheckpointManifest> m = VerifyCheckpointDir(ckpt);
  REQUIRE(m.ok());
  CHECK(m->step == 10);
  CHECK(m->kind == "lora-sd");
  std::set<std::string> names;
  for (const auto& f : m->files) names.insert(f.name);
  CHECK(names == std::set<std::string>{"lora.safetensors", "optimizer.safetensors",
                                       "rng.safetensors", "state.json"});
  REQUIRE(job.Run(job.Spec(params), b, ckpt) == kExitDone);
  for (const char* f : {"lora.safetensors", "lora_peft.safetensors"}) {
    INFO(f);
    std::string x = Bytes(OutputDirFor(a) + "/" + f), y = Bytes(OutputDirFor(b) + "/" + f);
    CHECK(x.size() == y.size());
    CHECK((x == y));
  }
  // The LoRA actually trained (B moved away from zero).
  TensorMap out = MustLoad(OutputDirFor(a) + "/lora_peft.safetensors");
  double bsum = 0;
  for (const auto& [k, v] : out) {
    if (k.find("lora_B") != std::string::npos) bsum += v.abs().sum().item<double>();
  }
  CHECK(bsum > 0);
  // A different seed gives a different LoRA.
  Json other = params;
  other["seed"] = 43;
  std::string c = job.tmp / "c";
  REQUIRE(job.Run(job.Spec(other), c) == kExitDone);
  CHECK(Bytes(OutputDirFor(a) + "/lora.safetensors") !=
        Bytes(OutputDirFor(c) + "/lora.safetensors"));
  // A checkpoint of a different run configuration is refused.
  Json mismatch = params;
  mismatch["rank"] = 8;
  CHECK(job.Run(job.Spec(mismatch), job.tmp / "d", ckpt) == kExitFailed);
}

}  // namespace

TEST_CASE("20 steps straight and 10 + resume + 10 give byte-identical LoRA files",
          "[lora_sd][resume]") {
  CheckResumeIsExact(/*sdxl=*/false);
}

TEST_CASE("SDXL-shaped: 20 steps straight and 10 + resume + 10 give byte-identical LoRA files",
          "[lora_sd][sdxl][resume]") {
  CheckResumeIsExact(/*sdxl=*/true);
}

namespace {

// A replay: the job's run resumed from `resume` ("" = from scratch) with --stop-at-step.
int Replay(const TinyJob& job, const Json& params, const std::string& work,
           const std::string& resume, int64_t stop_at) {
  RunArgs a;
  a.spec = MustSpec(job.Spec(params));
  a.work_dir = work;
  a.resume_dir = resume;
  a.stop_at_step = stop_at;
  return RunLoraSd(a);
}

bool PathExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// Every file of checkpoint directory `dir` (MANIFEST.json included), by name.
std::map<std::string, std::string> CheckpointFiles(const std::string& dir, int64_t step) {
  Result<CheckpointManifest> m = VerifyCheckpointDir(dir);
  REQUIRE(m.ok());
  CHECK(m->step == step);
  std::map<std::string, std::string> out = {{kManifestName, Bytes(dir + "/" + kManifestName)}};
  for (const ManifestFile& f : m->files) out[f.name] = Bytes(dir + "/" + f.name);
  return out;
}

}  // namespace

// A replay of a segment (verification) must give the very bytes the trainer committed: on the
// checkpoint schedule, off it (where a stopped run checkpoints), and at the job's last step,
// where the output is the export of the last checkpoint.
TEST_CASE("a replay (--stop-at-step) writes the checkpoint of that step as a full run does",
          "[lora_sd][resume][replay]") {
  TinyJob job(8);
  Json params = {{"steps", 12},
                 {"batch_size", 2},
                 {"rank", 4},
                 {"alpha", 8},
                 {"learning_rate", 1e-3},
                 {"checkpoint_every", 4},
                 {"lr_scheduler", "cosine"},
                 {"warmup_steps", 3},
                 {"gradient_accumulation", 2},
                 {"seed", 42}};
  std::string full = job.tmp / "full";
  REQUIRE(job.Run(job.Spec(params), full) == kExitDone);
  // On the schedule, from the checkpoint before it: the full run's checkpoint 8.
  std::string a = job.tmp / "a";
  REQUIRE(Replay(job, params, a, CheckpointDirFor(full, 4), 8) == kExitDone);
  CHECK((CheckpointFiles(CheckpointDirFor(a, 8), 8) ==
         CheckpointFiles(CheckpointDirFor(full, 8), 8)));
  CHECK_FALSE(PathExists(OutputDirFor(a)));
  // Off the schedule: from scratch and from checkpoint 4, the same step 6.
  std::string b = job.tmp / "b", c = job.tmp / "c";
  REQUIRE(Replay(job, params, b, "", 6) == kExitDone);
  REQUIRE(Replay(job, params, c, CheckpointDirFor(full, 4), 6) == kExitDone);
  CHECK((CheckpointFiles(CheckpointDirFor(b, 6), 6) == CheckpointFiles(CheckpointDirFor(c, 6), 6)));
  // ... and resuming from it finishes with the full run's outputs.
  std::string d = job.tmp / "d";
  REQUIRE(job.Run(job.Spec(params), d, CheckpointDirFor(b, 6)) == kExitDone);
  for (const char* f : {"lora.safetensors", "lora_peft.safetensors"}) {
    INFO(f);
    CHECK((Bytes(OutputDirFor(d) + "/" + f) == Bytes(OutputDirFor(full) + "/" + f)));
  }
  // The last step: the full run's checkpoint there (which records its export), and the output
  // too, byte-equal (a replay of the last segment checks the outputs).
  std::string e = job.tmp / "e";
  REQUIRE(Replay(job, params, e, CheckpointDirFor(full, 8), 12) == kExitDone);
  CHECK((CheckpointFiles(CheckpointDirFor(e, 12), 12) ==
         CheckpointFiles(CheckpointDirFor(full, 12), 12)));
  for (const char* f : {"lora.safetensors", "lora_peft.safetensors"}) {
    INFO(f);
    CHECK((Bytes(OutputDirFor(e) + "/" + f) == Bytes(OutputDirFor(full) + "/" + f)));
  }
  Result<CheckpointManifest> last = VerifyCheckpointDir(CheckpointDirFor(full, 12));
  Result<CheckpointManifest> out = VerifyCheckpointDir(OutputDirFor(full));
  REQUIRE(last.ok());
  REQUIRE(out.ok());
  Result<std::vector<ManifestFile>> recorded = ManifestOutputs(*last);
  REQUIRE(recorded.ok());
  CHECK(SameFiles(*recorded, out->files));
  CHECK(ManifestOutputs(*VerifyCheckpointDir(CheckpointDirFor(full, 8))).status().code() ==
        Code::kNotFound);
  // Resumed at the last step's checkpoint: no step trained, the same output (the export).
  std::string h = job.tmp / "h";
  REQUIRE(job.Run(job.Spec(params), h, CheckpointDirFor(full, 12)) == kExitDone);
  for (const char* f : {"lora.safetensors", "lora_peft.safetensors"}) {
    INFO(f);
    CHECK((Bytes(OutputDirFor(h) + "/" + f) == Bytes(OutputDirFor(full) + "/" + f)));
  }
  CHECK_FALSE(PathExists(CheckpointDirFor(h, 12)));
  // Beyond the job, or not after the resume point: the job's fault.
  CHECK(Replay(job, params, job.tmp / "f", "", 13) == kExitFailed);
  CHECK(Replay(job, params, job.tmp / "g", CheckpointDirFor(full, 8), 8) == kExitFailed);
}

namespace {

void CheckLossDecreases(bool sdxl) {
  constexpr int kSteps = 150;
  TinyJob job(8, /*prior=*/false, sdxl);
  Result<TensorMap> w = LoadWeights(job.tmp / "weights.safetensors");
  REQUIRE(w.ok());
  Result<Dataset> data = LoadDataset(job.tmp / "data.safetensors", ShapeOf(job.config));
  REQUIRE(data.ok());
  Result<LoraSdParams> p = LoraSdParams::Parse(
      {{"steps", kSteps}, {"batch_size", 4}, {"rank", 8}, {"alpha", 8}, {"learning_rate", 1e-2}});
  REQUIRE(p.ok());
  auto t = Trainer::Create(job.config, *w, std::move(*data), *p);
  REQUIRE(t.ok());
  std::vector<double> losses;
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kSteps; ++i) {
    Result<double> l = (*t)->Step();
    REQUIRE(l.ok());
    losses.push_back(*l);
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  auto mean = [&](size_t from, size_t to) {
    double s = 0;
    for (size_t i = from; i < to; ++i) s += losses[i];
    return s / double(to - from);
  };
  double first = mean(0, kSteps / 5), last = mean(kSteps - kSteps / 5, kSteps);
  WARN("mean loss over the first " << kSteps / 5 << " steps: " << first << ", over the last: "
                                   << last << " (" << kSteps << " steps, " << secs << " s)");
  CHECK(last < 0.8 * first);
}

}  // namespace

TEST_CASE("loss decreases on make-dataset data", "[lora_sd][train]") {
  CheckLossDecreases(/*sdxl=*/false);
}

TEST_CASE("SDXL-shaped: loss decreases on make-dataset --sdxl data", "[lora_sd][sdxl][train]") {
  CheckLossDecreases(/*sdxl=*/true);
}

TEST_CASE("outputs use the fixture's kohya and PEFT key names and record params",
          "[lora_sd][fixture]") {
  SKIP_WITHOUT_FIXTURE(dir);
  TinyJob job(4);
  Json spec = job.Spec({{"steps", 2}, {"rank", 4}, {"alpha", 4}});
  spec["inputs"]["model"] = dir + "/weights.safetensors";
  Result<std::string> cfg = ReadFile(dir + "/config.json");
  REQUIRE(cfg.ok());
  spec["model"]["config"] = *ParseJson(*cfg);
  // The fixture config has 16x16 samples; the 8x8 dataset works as well.
  REQUIRE(job.Run(spec, job.tmp / "w") == kExitDone);
  std::string out = OutputDirFor(job.tmp / "w");
  REQUIRE(VerifyCheckpointDir(out).ok());
  std::map<std::string, std::string> meta;
  CheckSameKeysAndShapes(MustLoad(out + "/lora.safetensors", &meta),
                         MustLoad(dir + "/lora/lora_kohya.safetensors"));
  CHECK(meta.at("ss_network_dim") == "4");
  Result<Json> params = ParseJson(meta.at("gleaner_params"));
  REQUIRE(params.ok());
  CHECK((*params)["steps"] == 2);
  CheckSameKeysAndShapes(MustLoad(out + "/lora_peft.safetensors"),
                         MustLoad(dir + "/lora/lora.safetensors"));
}

TEST_CASE("bad inputs and non-finite losses fail the job with a reason", "[lora_sd]") {
  TinyJob job(4);
  CHECK(job.Run(job.Spec({{"steps", 2}, {"rank", 0}}), job.tmp / "x") == kExitFailed);
  Json no_data = job.Spec({{"steps", 2}});
  no_data["inputs"].erase("dataset");
  CHECK(job.Run(no_data, job.tmp / "x") == kExitFailed);
  Json bad_cfg = job.Spec({{"steps", 2}});
  bad_cfg["model"]["config"]["block_out_channels"] = Json::array({32, 64, 128});
  CHECK(job.Run(bad_cfg, job.tmp / "x") == kExitFailed);
  // Finite but enormous latents overflow the loss to Inf.
  TensorMap d = MustLoad(job.tmp / "data.safetensors");
  d["latents"] = d["latents"] * 1e30;
  REQUIRE(SaveSafetensors(job.tmp / "data.safetensors", d).ok());
  CHECK(job.Run(job.Spec({{"steps", 2}}), job.tmp / "y") == kExitFailed);
  struct stat st;
  CHECK(::stat((OutputDirFor(job.tmp / "y") + "/lora.safetensors").c_str(), &st) != 0);
}

TEST_CASE("make-dataset is deterministic and loads", "[lora_sd][cli]") {
  TempDir tmp;
  REQUIRE(RunBin({"make-dataset", "--out", tmp / "a", "--n", "6", "--seed", "3"}) == 0);
  REQUIRE(RunBin({"make-dataset", "--out", tmp / "b", "--n", "6", "--seed", "3"}) == 0);
  REQUIRE(RunBin({"make-dataset", "--out", tmp / "c", "--n", "6", "--seed", "4", "--prior"}) == 0);
  CHECK(Bytes(tmp / "a") == Bytes(tmp / "b"));
  CHECK(Bytes(tmp / "a") != Bytes(tmp / "c"));
  Result<Dataset> d = LoadDataset(tmp / "c", ShapeOf(TinyConfig()));
  REQUIRE(d.ok());
  CHECK(d->size() == 6);
  CHECK(d->has_prior());
  CHECK(d->instance.latents.sizes() == torch::IntArrayRef({6, 4, 16, 16}));
  CHECK(RunBin({"make-dataset", "--out", tmp / "d", "--size", "12"}) == kExitUsage);
  CHECK(RunBin({"make-dataset", "--n", "3"}) == kExitUsage);
  UNetConfig wide = TinyConfig();
  wide.cross_attention_dim = 768;
  CHECK_FALSE(LoadDataset(tmp / "a", ShapeOf(wide)).ok());
}

TEST_CASE("forward CLI reproduces the reference output and gradients", "[lora_sd][cli][fixture]") {
  SKIP_WITHOUT_FIXTURE(dir);
  TempDir tmp;
  CheckForwardCli(dir, dir + "/lora/lora_kohya.safetensors", tmp / "o.safetensors");
  CHECK(RunBin({"forward", "--config", dir + "/config.json"}) == kExitUsage);
  CHECK(
      RunBin({"forward", "--config", dir + "/config.json", "--weights", dir + "/inputs.safetensors",
              "--inputs", dir + "/inputs.safetensors", "--out", tmp / "x"}) == kExitFailed);
}

TEST_CASE("SIGTERM checkpoints at a step boundary and the run resumes to the end",
          "[lora_sd][cli][signal]") {
  TinyJob job(8);
  Json spec = job.Spec({{"steps", 400}, {"checkpoint_every", 400}});
  std::string spec_path = job.tmp / "SPEC.json", work = job.tmp / "work";
  REQUIRE(WriteFileDurable(spec_path, spec.dump()).ok());
  int out[2];
  REQUIRE(::pipe(out) == 0);
  std::string bin = std::string(GLEANER_BIN_DIR) + "/gleaner-train";
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(out[1], 1);
    ::close(out[0]);
    ::execl(bin.c_str(), bin.c_str(), "run", "--spec", spec_path.c_str(), "--work-dir",
            work.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(out[1]);
  // Wait for the first progress line, then interrupt.
  std::string seen;
  char buf[4096];
  while (seen.find("gleaner progress") == std::string::npos) {
    ssize_t n = ::read(out[0], buf, sizeof buf);
    if (n <= 0) break;
    seen.append(buf, size_t(n));
  }
  ::kill(pid, SIGTERM);
  for (ssize_t n; (n = ::read(out[0], buf, sizeof buf)) > 0;) seen.append(buf, size_t(n));
  ::close(out[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  INFO(seen);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == kExitInterrupted);
  std::string ckpt = LatestCheckpointDir(work);
  REQUIRE_FALSE(ckpt.empty());
  Result<CheckpointManifest> m = VerifyCheckpointDir(ckpt);
  REQUIRE(m.ok());
  CHECK(m->step >= 1);
  CHECK(m->step < 400);
  CHECK(seen.find("gleaner checkpoint step=" + std::to_string(m->step)) != std::string::npos);
  CHECK(RunBin({"run", "--spec", spec_path, "--work-dir", work, "--resume", ckpt}) == kExitDone);
  CHECK(VerifyCheckpointDir(OutputDirFor(work)).ok());
}

using gleaner::testing::ScopedEnv;

// A resume or a replay on another node must give the same bytes, and nodes have different core
// counts: libtorch's default (one thread per core, or OMP_NUM_THREADS) splits CPU sums
// differently, which moves fp32 LoRA tensors (1 vs 2 threads: ~1e-6 within 10 steps). The
// trainer pins its CPU threads instead (nn/torch_env.h).
TEST_CASE("CPU training gives the same bytes whatever the node's thread count", "[lora_sd][cli]") {
  TinyJob job(8);
  Json spec = job.Spec({{"steps", 15}, {"checkpoint_every", 15}, {"batch_size", 4}});
  std::string spec_path = job.tmp / "SPEC.json";
  REQUIRE(WriteFileDurable(spec_path, spec.dump()).ok());
  auto lora = [&](const char* omp, const char* pinned, const std::string& name) {
    ScopedEnv a("OMP_NUM_THREADS", omp), b("GLEANER_CPU_THREADS", pinned);
    std::string work = job.tmp / name;
    REQUIRE(RunBin({"run", "--spec", spec_path, "--work-dir", work}) == kExitDone);
    return Bytes(OutputDirFor(work) + "/lora.safetensors");
  };
  std::string one = lora("1", nullptr, "one"), two = lora("2", nullptr, "two");
  CHECK(one == two);
  // The pin is what holds it: with 2 threads chosen explicitly, the bytes differ.
  CHECK(lora(nullptr, "2", "pinned2") != one);
}

TEST_CASE("the trainer's CPU thread count comes from GLEANER_CPU_THREADS, default 1", "[lora_sd]") {
  const int before = torch::get_num_threads();
  {
    ScopedEnv e("GLEANER_CPU_THREADS", nullptr);
    torch::set_num_threads(2);
    ApplyTorchEnvironment();
    CHECK(torch::get_num_threads() == 1);
  }
  {
    ScopedEnv e("GLEANER_CPU_THREADS", "2");
    ApplyTorchEnvironment();
    CHECK(torch::get_num_threads() == 2);
  }
  {
    ScopedEnv e("GLEANER_CPU_THREADS", "zero");
    ApplyTorchEnvironment();
    CHECK(torch::get_num_threads() == 1);
  }
  torch::set_num_threads(before);
}
