// The trainer's memory estimate (training/memory_estimate.h): parameter counts equal the built
// modules' and diffusers' published counts; a job over the node's budget is refused with one
// line naming the setting to lower, and gleaner-train refuses it before allocating.
#include "agent/train/training/memory_estimate.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <sstream>

#include "agent/protocol/memory_budget.h"
#include "agent/protocol/trainer_protocol.h"
#include "agent/train/denoiser/denoiser_lora.h"
#include "agent/train/models/text/clip_text_model.h"
#include "agent/train/models/unet/unet.h"
#include "agent/train/models/vae/autoencoder_kl.h"
#include "agent/train/training/dataset.h"

using namespace gleaner;
using namespace gleaner::train;
using namespace gleaner::train::unet;
using namespace gleaner::train::training;

namespace {

int64_t Numel(const std::vector<torch::Tensor>& ts) {
  int64_t n = 0;
  for (const torch::Tensor& t : ts) n += t.numel();
  return n;
}

LoraSdParams Params(Json extra = Json::object()) {
  Json p = {{"steps", 10}};
  for (auto& [k, v] : extra.items()) p[k] = v;
  Result<LoraSdParams> r = LoraSdParams::Parse(p);
  REQUIRE(r.ok());
  return *r;
}

MemoryJob Job(const UNetConfig& c, int64_t latent) {
  MemoryJob j;
  j.unet = c;
  j.latent_height = j.latent_width = latent;
  return j;
}

constexpr int64_t kGiB = int64_t(1) << 30;

}  // namespace

TEST_CASE("memory estimate: parameter counts equal the built modules'", "[memory]") {
  for (const UNetConfig& c : {TinyConfig(), TinySdxlConfig()}) {
    UNet unet(c);
    CHECK(UNetParameterCount(c) == Numel(unet.parameters()));
    Result<DenoiserLora> lora = DenoiserLora::Attach(unet, 4, 4, at::detail::createCPUGenerator(1));
    REQUIRE(lora.ok());
    CHECK(UNetLoraParameterCount(c, 4) == Numel(lora->Parameters()));
  }
  // diffusers' counts of the real architectures (UNet2DConditionModel.num_parameters()).
  CHECK(UNetParameterCount(Sd15Config()) == 859520964);
  CHECK(UNetParameterCount(SdxlConfig()) == 2567463684);
  // A LoRA of rank 4 on SD 1.5's attention projections: 797,184 parameters (3.2 MB in fp32).
  CHECK(UNetLoraParameterCount(Sd15Config(), 4) == 797184);

  vae::VaeConfig v;
  v.block_out_channels = {8, 16, 16};
  v.norm_num_groups = 4;
  v.layers_per_block = 2;
  CHECK(VaeParameterCount(v) == Numel(vae::AutoencoderKL(v).parameters()));
  vae::VaeConfig sd;
  sd.block_out_channels = {128, 256, 512, 512};
  sd.layers_per_block = 2;
  CHECK(VaeParameterCount(sd) == 83653863);  // SD's AutoencoderKL

  text::ClipTextConfig t;
  t.vocab_size = 100;
  t.hidden_size = 32;
  t.intermediate_size = 64;
  t.num_hidden_layers = 2;
  t.num_attention_heads = 4;
  t.max_position_embeddings = 16;
  t.projection_dim = 24;
  for (bool projection : {false, true}) {
    t.with_projection = projection;
    CHECK(ClipTextParameterCount(t) == Numel(text::ClipTextModel(t).parameters()));
  }
  text::ClipTextConfig l;  // CLIP ViT-L/14's text tower (SD 1.x's text_encoder)
  l.hidden_size = 768;
  l.intermediate_size = 3072;
  l.num_attention_heads = 12;
  CHECK(ClipTextParameterCount(l) == 123060480);
}

TEST_CASE("memory estimate: grows with what the params say, and the check names the setting",
          "[memory]") {
  const UNetConfig sd = Sd15Config();
  const MemoryEstimate one = EstimateMemory(Job(sd, 64), Params());
  const MemoryEstimate eight = EstimateMemory(Job(sd, 64), Params({{"batch_size", 8}}));
  CHECK(eight.activations == 8 * one.activations);
  const MemoryEstimate ckpt =
      EstimateMemory(Job(sd, 64), Params({{"batch_size", 8}, {"gradient_checkpointing", true}}));
  CHECK(ckpt.activations < eight.activations / 2);
  CHECK(one.denoiser_weights == 859520964.0 * 4);
  const MemoryEstimate bf16 = EstimateMemory(Job(sd, 64), Params({{"mixed_precision", "bf16"}}));
  CHECK(bf16.denoiser_weights == 859520964.0 * 2);
  CHECK(EstimateMemory(Job(sd, 64), Params({{"rank", 64}})).lora == 16.0 * 797184 * 16);

  // SD 1.5, batch 32 at 512 px on a 24 GB card: refused, naming batch_size.
  MemoryJob cuda = Job(sd, 64);
  cuda.cuda = true;
  LoraSdParams big = Params({{"batch_size", 32}, {"mixed_precision", "fp16"}});
  Status s = CheckMemory(EstimateMemory(cuda, big), cuda.cuda, big, 64 * kGiB, 24 * kGiB);
  REQUIRE(!s.ok());
  CHECK(s.code() == Code::kInvalidArgument);
  CHECK(s.message().find("VRAM") != std::string::npos);
  CHECK(s.message().find("lower batch_size (32) or set gradient_checkpointing") !=
        std::string::npos);
  CHECK(s.message().find('\n') == std::string::npos);
  // Batch 1 with checkpointing fits the same card.
  LoraSdParams small = Params({{"mixed_precision", "fp16"}, {"gradient_checkpointing", true}});
  CHECK(CheckMemory(EstimateMemory(cuda, small), cuda.cuda, small, 64 * kGiB, 24 * kGiB).ok());
  // Samples at 2048 px with the explicit kernel: the sample size is what to lower.
  MemoryJob samples = cuda;
  samples.has_vae = true;
  samples.vae.block_out_channels = {128, 256, 512, 512};
  LoraSdParams sampled = Params({{"mixed_precision", "fp16"},
                                 {"gradient_checkpointing", true},
                                 {"sample_prompts", {"a photo"}},
                                 {"sample_resolution", 2048}});
  s = CheckMemory(EstimateMemory(samples, sampled), samples.cuda, sampled, 64 * kGiB, 24 * kGiB);
  REQUIRE(!s.ok());
  CHECK(s.message().find("lower sample_resolution (2048)") != std::string::npos);
  // On the CPU the host budget decides; unknown budgets (0) pass.
  MemoryJob cpu = Job(sd, 64);
  s = CheckMemory(EstimateMemory(cpu, big), cpu.cuda, big, 8 * kGiB, 0);
  REQUIRE(!s.ok());
  CHECK(s.message().find("of RAM") != std::string::npos);
  CHECK(CheckMemory(EstimateMemory(cpu, big), cpu.cuda, big, 0, 0).ok());
  // The tiny test models fit in 512 MiB (300 MiB of it the process itself).
  LoraSdParams tiny = Params({{"batch_size", 4}});
  for (const UNetConfig& c : {TinyConfig(), TinySdxlConfig()}) {
    MemoryJob j = Job(c, 8);
    CHECK(CheckMemory(EstimateMemory(j, tiny), j.cuda, tiny, 512 << 20, 0).ok());
  }
}

TEST_CASE("memory estimate: the figures behind the params' upper bounds", "[memory]") {
  // job_params.cc: one SD 1.5 sample at 256 px with gradient checkpointing and bf16.
  MemoryJob j = Job(Sd15Config(), 32);
  j.cuda = true;
  const MemoryEstimate e =
      EstimateMemory(j, Params({{"mixed_precision", "bf16"}, {"gradient_checkpointing", true}}));
  CHECK(e.activations < 0.25 * kGiB);
  CHECK(e.activations > 0.05 * kGiB);
  // SDXL's LoRA at the bound (rank 256): under 6 GiB with its optimizer state.
  CHECK(EstimateMemory(Job(SdxlConfig(), 128), Params({{"rank", kMaxLoraRank}})).lora < 6.0 * kGiB);
  CHECK(UNetLoraParameterCount(SdxlConfig(), 1) > 1400000);
  CHECK(UNetLoraParameterCount(SdxlConfig(), 1) < 1500000);
}

TEST_CASE("memory budget: meminfo and cgroup files", "[memory]") {
  CHECK(ParseMemAvailable("MemTotal:       16000000 kB\nMemAvailable:    8000000 kB\n") ==
        int64_t(8000000) * 1024);
  CHECK(ParseMemAvailable("MemTotal: 1 kB\n") == 0);
  CHECK(ParseCgroupLimit("max\n") == 0);
  CHECK(ParseCgroupLimit("1073741824\n") == kGiB);
  CHECK(ParseCgroupLimit("garbage") == 0);
  char tmpl[] = "/tmp/membudget-XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  const std::string root = tmpl;
  auto write = [&](const std::string& rel, const std::string& text) {
    REQUIRE(system(("mkdir -p \"$(dirname '" + root + rel + "')\"").c_str()) == 0);
    std::ofstream(root + rel) << text;
  };
  write("/proc/meminfo", "MemAvailable:    8388608 kB\n");
  write("/proc/self/cgroup", "0::/agent.slice/gleaner.service\n");
  write("/sys/fs/cgroup/agent.slice/gleaner.service/memory.max", "max\n");
  write("/sys/fs/cgroup/agent.slice/memory.max", "4294967296\n");
  write("/sys/fs/cgroup/agent.slice/memory.current", "1073741824\n");
  CHECK(DetectHostMemoryBytes(root) == 3 * kGiB);  // the limited ancestor's room
  write("/sys/fs/cgroup/agent.slice/memory.max", "max\n");
  CHECK(DetectHostMemoryBytes(root) == 8 * kGiB);  // no limit: MemAvailable
  CHECK(system(("rm -rf '" + root + "'").c_str()) == 0);
  const std::vector<std::string> env = BudgetEnvironment({5, 0});
  REQUIRE(env.size() == 1);
  CHECK(env[0] == "GLEANER_MEMORY_BUDGET_BYTES=5");
}

namespace {

// Runs gleaner-train run on `spec` with GLEANER_MEMORY_BUDGET_BYTES=budget; returns its exit code
// and its stderr in *err.
int RunTrainer(const std::string& dir, const Json& spec, int64_t budget, std::string* err) {
  const std::string spec_path = dir + "/SPEC.json", err_path = dir + "/stderr.txt";
  std::ofstream(spec_path) << DumpJson(spec);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setenv("GLEANER_MEMORY_BUDGET_BYTES", std::to_string(budget).c_str(), 1);
    ::unsetenv("GLEANER_VRAM_BUDGET_BYTES");
    ::setenv("CUDA_VISIBLE_DEVICES", "", 1);  // the CPU budget decides
    const std::string bin = std::string(GLEANER_BIN_DIR) + "/gleaner-train";
    const std::string work = dir + "/work";
    const char* argv[] = {bin.c_str(),  "run",        "--spec", spec_path.c_str(),
                          "--work-dir", work.c_str(), nullptr};
    int out = ::open("/dev/null", O_WRONLY);
    int e = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(out, 1);
    ::dup2(e, 2);
    ::execv(bin.c_str(), const_cast<char* const*>(argv));
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  std::ifstream in(err_path);
  std::stringstream ss;
  ss << in.rdbuf();
  *err = ss.str();
  return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

// A weights-file job in `dir`: `weights_config`'s random weights, a matching latent dataset,
// and `config` as the spec's model.config.
Json WeightsFileJob(const std::string& dir, const UNetConfig& config,
                    const UNetConfig& weights_config, Json params) {
  REQUIRE(SaveSafetensors(dir + "/weights.safetensors", RandomWeights(weights_config, 1)).ok());
  MakeDatasetOptions o;
  o.n = 4;
  o.size = 8;
  o.tokens = 4;
  o.dim = config.cross_attention_dim;
  o.pooled = config.pooled_dim();
  Result<std::string> d = MakeDataset(o);
  REQUIRE(d.ok());
  std::ofstream(dir + "/data.safetensors", std::ios::binary) << *d;
  return Json{
      {"job_id", "job-m"},
      {"kind", "lora-sd"},
      {"params", std::move(params)},
      {"inputs", {{"model", dir + "/weights.safetensors"}, {"dataset", dir + "/data.safetensors"}}},
      {"model", {{"config", UNetConfigToJson(config)}}}};
}

}  // namespace

TEST_CASE("gleaner-train refuses a job over its memory budget before allocating", "[memory]") {
  char tmpl[] = "/tmp/memrefuse-XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  const std::string dir = tmpl;
  // The config says 4096 channels (the UNet alone would be about 7e9 parameters, 28 GB in fp32;
  // built before its weights are checked); the weights file is a tiny model's. With a 1 GiB
  // budget the trainer refuses at once, naming the job's size and what to lower.
  UNetConfig huge = TinyConfig();
  for (int& ch : huge.block_out_channels) ch = 4096;
  Json spec = WeightsFileJob(dir, huge, TinyConfig(), {{"steps", 2}, {"batch_size", 8}});
  std::string err;
  const auto start = std::chrono::steady_clock::now();
  CHECK(RunTrainer(dir, spec, kGiB, &err) == kExitFailed);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO(err);
  CHECK(err.find("memory: this job needs about") != std::string::npos);
  CHECK(err.find("GiB of RAM and the node allows 1.0 GiB") != std::string::npos);
  CHECK(seconds < 20);
  // The tiny model itself trains within 1 GiB.
  const std::string ok_dir = dir + "/ok";
  REQUIRE(::mkdir(ok_dir.c_str(), 0700) == 0);
  Json tiny = WeightsFileJob(ok_dir, TinyConfig(), TinyConfig(), {{"steps", 2}, {"batch_size", 2}});
  CHECK(RunTrainer(ok_dir, tiny, kGiB, &err) == kExitDone);
  INFO(err);
  CHECK(err.find("lora-sd: memory estimate") != std::string::npos);
  CHECK(system(("rm -rf '" + dir + "'").c_str()) == 0);
}
