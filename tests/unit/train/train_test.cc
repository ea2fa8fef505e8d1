// lora-sd training: determinism and byte-identical resume, loss decrease, outputs, failures,
// and the real gleaner-train binary (make-dataset, forward, SIGTERM + resume).
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "agent/protocol/checkpoint_dir.h"
#include "agent/protocol/trainer_protocol.h"
#include "agent/train/kinds.h"
#include "agent/train/lora_sd/dataset.h"
#include "agent/train/lora_sd/trainer.h"
#include "train_test_util.h"  // Catch2, via the CHECK fix-up

using namespace gleaner;
using namespace gleaner::train;
using namespace gleaner::train::testing;

namespace {

// A tiny model, weights and dataset in a scratch directory, and a spec for them.
struct TinyJob {
  TempDir tmp;
  UNetConfig config = TinyConfig();
  TinyJob(int64_t n = 8, bool prior = false) {
    REQUIRE(SaveSafetensors(tmp / "weights.safetensors", RandomWeights(config, 1)).ok());
    MakeDatasetOptions o;
    o.n = n;
    o.size = 8;
    o.tokens = 4;
    o.dim = config.cross_attention_dim;
    o.seed = 7;
    o.prior = prior;
    Result<std::string> d = MakeDataset(o);
    REQUIRE(d.ok());
    REQUIRE(WriteFileDurable(tmp / "data.safetensors", *d).ok());
  }
  Json Spec(Json params) const {
    return Json{
        {"job_id", "job-1"},
        {"kind", "lora-sd"},
        {"params", std::move(params)},
        {"inputs", {{"model", tmp / "weights.safetensors"}, {"dataset", tmp / "data.safetensors"}}},
        {"model", {{"config", UNetConfigToJson(config)}}}};
  }
  int Run(const Json& spec, const std::string& work, const std::string& resume = "") const {
    RunArgs a;
    a.spec = spec;
    a.work_dir = work;
    a.resume_dir = resume;
    return RunLoraSd(a);
  }
};

std::string Bytes(const std::string& path) {
  Result<std::string> r = ReadFile(path);
  REQUIRE(r.ok());
  return *r;
}

}  // namespace

TEST_CASE("20 steps straight and 10 + resume + 10 give byte-identical LoRA files",
          "[lora_sd][resume]") {
  TinyJob job(8, /*prior=*/true);
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

TEST_CASE("loss decreases on make-dataset data", "[lora_sd][train]") {
  constexpr int kSteps = 150;
  TinyJob job(8);
  Result<TensorMap> w = LoadWeights(job.tmp / "weights.safetensors");
  REQUIRE(w.ok());
  Result<Dataset> data = LoadDataset(job.tmp / "data.safetensors", 4, 32);
  REQUIRE(data.ok());
  Result<TrainParams> p = TrainParams::FromJson(
      {{"steps", kSteps}, {"batch_size", 4}, {"rank", 8}, {"alpha", 8}, {"learning_rate", 1e-2}},
      0);
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
  Result<TensorMap> kohya = LoadSafetensors(out + "/lora.safetensors", &meta);
  REQUIRE(kohya.ok());
  TensorMap ref = MustLoad(dir + "/lora/lora_kohya.safetensors");
  REQUIRE(kohya->size() == ref.size());
  for (const auto& [k, v] : ref) {
    INFO(k);
    REQUIRE(kohya->count(k));
    CHECK(kohya->at(k).sizes() == v.sizes());
  }
  CHECK(meta.at("ss_network_dim") == "4");
  Result<Json> params = ParseJson(meta.at("gleaner_params"));
  REQUIRE(params.ok());
  CHECK((*params)["steps"] == 2);
  TensorMap peft = MustLoad(out + "/lora_peft.safetensors");
  TensorMap pref = MustLoad(dir + "/lora/lora.safetensors");
  REQUIRE(peft.size() == pref.size());
  for (const auto& [k, v] : pref) {
    INFO(k);
    REQUIRE(peft.count(k));
    CHECK(peft.at(k).sizes() == v.sizes());
  }
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

namespace {

// Runs the gleaner-train binary; returns its exit code (-signal if killed).
int RunBin(const std::vector<std::string>& args) {
  pid_t pid = ::fork();
  if (pid == 0) {
    std::vector<char*> argv;
    std::string bin = std::string(GLEANER_BIN_DIR) + "/gleaner-train";
    argv.push_back(const_cast<char*>(bin.c_str()));
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    int devnull = ::open("/dev/null", O_WRONLY);
    ::dup2(devnull, 1);
    ::execv(bin.c_str(), argv.data());
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

}  // namespace

TEST_CASE("make-dataset is deterministic and loads", "[lora_sd][cli]") {
  TempDir tmp;
  REQUIRE(RunBin({"make-dataset", "--out", tmp / "a", "--n", "6", "--seed", "3"}) == 0);
  REQUIRE(RunBin({"make-dataset", "--out", tmp / "b", "--n", "6", "--seed", "3"}) == 0);
  REQUIRE(RunBin({"make-dataset", "--out", tmp / "c", "--n", "6", "--seed", "4", "--prior"}) == 0);
  CHECK(Bytes(tmp / "a") == Bytes(tmp / "b"));
  CHECK(Bytes(tmp / "a") != Bytes(tmp / "c"));
  Result<Dataset> d = LoadDataset(tmp / "c", 4, 32);
  REQUIRE(d.ok());
  CHECK(d->size() == 6);
  CHECK(d->has_prior());
  CHECK(d->latents.sizes() == torch::IntArrayRef({6, 4, 16, 16}));
  CHECK(RunBin({"make-dataset", "--out", tmp / "d", "--size", "12"}) == kExitUsage);
  CHECK(RunBin({"make-dataset", "--n", "3"}) == kExitUsage);
  CHECK_FALSE(LoadDataset(tmp / "a", 4, 768).ok());
}

TEST_CASE("forward CLI reproduces the reference output and gradients", "[lora_sd][cli][fixture]") {
  SKIP_WITHOUT_FIXTURE(dir);
  TempDir tmp;
  REQUIRE(RunBin({"forward", "--config", dir + "/config.json", "--weights",
                  dir + "/weights.safetensors", "--inputs", dir + "/inputs.safetensors", "--lora",
                  dir + "/lora/lora_kohya.safetensors", "--grad-weights",
                  dir + "/inputs.safetensors", "--out", tmp / "o.safetensors"}) == 0);
  TensorMap o = MustLoad(tmp / "o.safetensors");
  CHECK(RelL2(o.at("sample"), MustLoad(dir + "/lora/output.safetensors").at("sample")) <= 1e-5);
  for (const auto& [k, v] : MustLoad(dir + "/lora/grad.safetensors")) {
    INFO(k);
    REQUIRE(o.count(k));
    CHECK(RelL2(o.at(k), v) <= 1e-4);
  }
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
