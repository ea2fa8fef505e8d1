// lora-sd base_precision "fp8" (kohya's --fp8_base): the frozen Linear weights stored in
// float8_e4m3fn and upcast per layer. On libtorch 2.1+: the UNet reference fixtures' forward with
// fp8 Linear weights stays within a stated bound of the fp32 reference, and a tiny job trains to a
// loss within a stated bound of the same job in bf16. Before 2.1: gleaner-train refuses the
// setting at start with one line and exit 2.
#include <algorithm>
#include <cstdio>
#include <fstream>

#include "agent/protocol/trainer_protocol.h"
#include "agent/train/models/unet/unet.h"
#include "agent/train/nn/torch_compat.h"
#include "agent/train/training/trainer.h"
#include "train_test_util.h"  // Catch2, via the CHECK fix-up

using namespace gleaner;
using namespace gleaner::train;
using namespace gleaner::train::testing;

namespace {

// Bounds (docs/training.md, "fp8 frozen weights"): e4m3 keeps 3 mantissa bits, so each weight is
// off by up to 1/16 of itself (and small weights, below 2^-6, by more: subnormals); the errors
// of a layer's many weights mostly cancel in its outputs.
[[maybe_unused]] constexpr double kFixtureRelL2 =
    0.1;  // forward vs the fp32 reference, per fixture
[[maybe_unused]] constexpr double kLossRelative = 0.05;  // mean loss of the last steps vs bf16

Json Params(bool fp8) {
  Json p = {{"steps", 40},
            {"batch_size", 4},
            {"rank", 8},
            {"alpha", 8},
            {"seed", 3},
            {"learning_rate", 1e-2},
            {"checkpoint_every", 40},
            {"mixed_precision", "bf16"}};
  if (fp8) p["base_precision"] = "fp8";
  return p;
}

// Per-step losses of a tiny job trained in-process.
[[maybe_unused]] std::vector<double> Losses(const TinyJob& job, bool fp8,
                                            std::shared_ptr<UNet>* unet = nullptr) {
  Result<TensorMap> w = LoadWeights(job.tmp / "weights.safetensors");
  REQUIRE(w.ok());
  Result<Dataset> data = LoadDataset(job.tmp / "data.safetensors", ShapeOf(job.config));
  REQUIRE(data.ok());
  Result<LoraSdParams> p = LoraSdParams::Parse(Params(fp8));
  REQUIRE(p.ok());
  auto t = Trainer::Create(job.config, *w, std::move(*data), *p);
  INFO(t.status().ToString());
  REQUIRE(t.ok());
  std::vector<double> losses;
  for (int64_t i = 0; i < p->steps; ++i) {
    Result<double> l = (*t)->Step();
    REQUIRE(l.ok());
    losses.push_back(*l);
  }
  if (unet != nullptr) *unet = std::dynamic_pointer_cast<UNet>((*t)->denoiser());
  return losses;
}

[[maybe_unused]] double MeanFrom(const std::vector<double>& v, size_t from) {
  double s = 0;
  for (size_t i = from; i < v.size(); ++i) s += v[i];
  return s / double(v.size() - from);
}

}  // namespace

TEST_CASE("base_precision: auto by default, fp8 accepted and kept, others refused",
          "[lora_sd][precision][fp8]") {
  Result<LoraSdParams> d = LoraSdParams::Parse({{"steps", 2}});
  REQUIRE(d.ok());
  CHECK(d->base_precision == "auto");
  CHECK_FALSE(d->ToJson().contains("base_precision"));  // specs of existing jobs stay as they were
  Result<LoraSdParams> f = LoraSdParams::Parse({{"steps", 2}, {"base_precision", "fp8"}});
  REQUIRE(f.ok());
  CHECK(f->ToJson().at("base_precision") == "fp8");
  CHECK_FALSE(LoraSdParams::Parse({{"steps", 2}, {"base_precision", "fp4"}}).ok());
}

// Each libtorch generation registers the cases that apply to it: 2.1+ trains with fp8, older
// ones refuse it.
#if GLEANER_TORCH_AT_LEAST(2, 1)
TEST_CASE("fp8 frozen weights: UNet fixtures' forward within a bound of fp32",
          "[lora_sd][precision][fp8][fixture]") {
  SKIP_WITHOUT_FIXTURE(sd_dir);
  std::vector<std::string> dirs = {sd_dir};
  for (const std::string& d : SdxlFixtureDirs()) dirs.push_back(d);
  for (const std::string& dir : dirs) {
    INFO(dir);
    UNetConfig config = MustConfig(dir + "/config.json");
    TensorMap inputs = MustLoad(dir + "/inputs.safetensors");
    BasePlacement placement;
    placement.fp8_linear = true;
    UNet u(config, placement);
    REQUIRE(LoadStateDict(u, MustLoad(dir + "/weights.safetensors")).ok());
    // Linear weights are fp8; their biases, convolutions and norms fp32.
    int64_t fp8 = 0, other = 0;
    for (const auto& p : u.named_parameters(true)) {
      if (IsFp8(p.value())) {
        ++fp8;
        CHECK(p.value().dim() == 2);
      } else {
        ++other;
        CHECK(p.value().scalar_type() == torch::kFloat32);
      }
    }
    CHECK(fp8 > 0);
    CHECK(other > 0);
    CHECK(u.named_parameters(true)["conv_in.weight"].scalar_type() == torch::kFloat32);
    torch::NoGradGuard no_grad;
    torch::Tensor y = config.has_text_time()
                          ? u.forward(inputs.at("sample"), inputs.at("timestep"),
                                      inputs.at("encoder_hidden_states"),
                                      {inputs.at("text_embeds"), inputs.at("time_ids")})
                          : u.forward(inputs.at("sample"), inputs.at("timestep"),
                                      inputs.at("encoder_hidden_states"));
    torch::Tensor ref = MustLoad(dir + "/output.safetensors").at("sample");
    REQUIRE(y.sizes() == ref.sizes());
    REQUIRE(y.scalar_type() == torch::kFloat32);
    double rel = RelL2(y, ref);
    WARN(dir << ": fp8 Linear weights, forward rel-L2 vs the fp32 reference " << rel);
    CHECK(rel <= kFixtureRelL2);
    CHECK(rel > 0);  // the weights really were rounded
  }
}

TEST_CASE("fp8 frozen weights: a tiny job trains to a loss within a bound of bf16",
          "[lora_sd][precision][fp8]") {
  TinyJob job(8, /*prior=*/false, /*sdxl=*/false);
  std::shared_ptr<UNet> unet;
  std::vector<double> bf16 = Losses(job, false), fp8 = Losses(job, true, &unet);
  for (const auto& [name, l] : unet->LoraTargets()) {
    INFO(name);
    CHECK(IsFp8(l->weight));                            // frozen base: fp8
    CHECK(l->lora_a.scalar_type() == torch::kFloat32);  // LoRA: fp32, as without fp8
    CHECK(l->lora_b.scalar_type() == torch::kFloat32);
  }
  const size_t last = bf16.size() - 10;
  double a = MeanFrom(bf16, last), b = MeanFrom(fp8, last), first = MeanFrom(bf16, 0);
  WARN("mean loss over the last 10 of 40 steps: bf16 " << a << ", fp8 base " << b
                                                       << " (bf16 over all steps " << first << ")");
  CHECK(std::abs(b - a) <= kLossRelative * a);
  CHECK(fp8 != bf16);  // the fp8 path really ran
}

#else
TEST_CASE("fp8 frozen weights are refused at start before libtorch 2.1",
          "[lora_sd][precision][fp8]") {
  TinyJob job;
  Json spec = job.Spec(Params(true));
  std::string spec_path = job.tmp / "SPEC.json", err = job.tmp / "stderr";
  std::ofstream(spec_path) << spec.dump();
  int code = RunBin({"run", "--spec", spec_path, "--work-dir", job.tmp / "work"}, err);
  CHECK(code == kExitFailed);
  Result<std::string> text = ReadFile(err);
  REQUIRE(text.ok());
  INFO(*text);
  CHECK(std::count(text->begin(), text->end(), '\n') == 1);
  CHECK(text->find("base_precision") != std::string::npos);
  CHECK(text->find("libtorch 2.1") != std::string::npos);
}
#endif
