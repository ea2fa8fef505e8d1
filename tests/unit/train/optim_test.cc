// lora-sd training math: DDPM schedule vs the reference, lr schedules, AdamW, clipping, scaler.
#include "agent/train/training/optim.h"

#include <cmath>

#include "agent/train/sampling/noise_schedule.h"
#include "train_test_util.h"  // Catch2, via the CHECK fix-up

using namespace gleaner;
using namespace gleaner::train::testing;

TEST_CASE("DDPM scaled-linear schedule matches diffusers", "[lora_sd][fixture]") {
  SKIP_WITHOUT_FIXTURE(dir);
  Result<std::string> text = ReadFile(dir + "/ddpm.json");
  REQUIRE(text.ok());
  Json j = *ParseJson(*text);
  torch::Tensor ac = sampling::ScaledLinearAlphasCumprod(j["num_train_timesteps"].get<int64_t>(),
                                                         j["beta_start"].get<double>(),
                                                         j["beta_end"].get<double>());
  REQUIRE(ac.size(0) == 1000);
  const Json& ts = j["timesteps"];
  for (size_t i = 0; i < ts.size(); ++i) {
    int64_t t = ts[i].get<int64_t>();
    double got = ac[t].item<double>();
    INFO("t=" << t);
    CHECK(got == Approx(j["alphas_cumprod_fp32_diffusers"][i].get<double>()).epsilon(1e-6));
    CHECK(got == Approx(j["alphas_cumprod_fp64"][i].get<double>()).epsilon(1e-5));
    CHECK(std::sqrt(1 - got) ==
          Approx(j["sqrt_one_minus_alphas_cumprod_fp64"][i].get<double>()).epsilon(1e-4));
  }
}

TEST_CASE("learning-rate schedules follow diffusers' get_scheduler", "[lora_sd]") {
  CHECK(LrMultiplier("constant", 0, 10, 100) == 1.0);
  CHECK(LrMultiplier("constant_with_warmup", 0, 10, 100) == 0.0);
  CHECK(LrMultiplier("constant_with_warmup", 5, 10, 100) == 0.5);
  CHECK(LrMultiplier("constant_with_warmup", 50, 10, 100) == 1.0);
  CHECK(LrMultiplier("linear", 5, 10, 100) == 0.5);
  CHECK(LrMultiplier("linear", 10, 10, 100) == 1.0);
  CHECK(LrMultiplier("linear", 55, 10, 100) == Approx(0.5));
  CHECK(LrMultiplier("linear", 100, 10, 100) == 0.0);
  CHECK(LrMultiplier("cosine", 10, 10, 110) == Approx(1.0));
  CHECK(LrMultiplier("cosine", 60, 10, 110) == Approx(0.5));
  CHECK(LrMultiplier("cosine", 110, 10, 110) == Approx(0.0).margin(1e-12));
  CHECK(LrMultiplier("cosine", 3, 0, 4) == Approx(0.5 * (1 + std::cos(M_PI * 0.75))));
  CHECK(IsKnownLrScheduler("cosine"));
  CHECK_FALSE(IsKnownLrScheduler("polynomial"));
}

TEST_CASE("AdamW step matches torch.optim.AdamW by hand and restores exactly", "[lora_sd]") {
  torch::Tensor p = torch::ones({1}).requires_grad_(true);
  AdamWOptions o;  // 0.9, 0.999, 1e-8, wd 0.01
  AdamW opt({p}, o);
  p.mutable_grad() = torch::full({1}, 0.5);
  opt.Step(0.1);
  // decay: 1 * (1 - 0.1*0.01) = 0.999; m = 0.05, v = 0.00025; bc1 = 0.1, bc2 = 0.001;
  // denom = sqrt(0.25) + 1e-8; update = 0.1/0.1 * 0.05/0.5 = 0.1.
  CHECK(p.item<double>() == Approx(0.899).epsilon(1e-6));
  TensorMap st = opt.State();
  CHECK(st.at("step").item<int64_t>() == 1);
  torch::Tensor q = p.detach().clone().requires_grad_(true);
  AdamW opt2({q}, o);
  REQUIRE(opt2.Restore(st).ok());
  p.mutable_grad() = torch::full({1}, -0.25);
  q.mutable_grad() = torch::full({1}, -0.25);
  opt.Step(0.05);
  opt2.Step(0.05);
  CHECK(torch::equal(p, q));
  TensorMap bad = st;
  bad.erase("exp_avg.0");
  CHECK_FALSE(opt2.Restore(bad).ok());
}

TEST_CASE("gradient clipping scales to max_norm", "[lora_sd]") {
  torch::Tensor a = torch::zeros({2}).requires_grad_(true),
                b = torch::zeros({1}).requires_grad_(true);
  a.mutable_grad() = torch::tensor({3.0f, 0.0f});
  b.mutable_grad() = torch::tensor({4.0f});
  CHECK(ClipGradNorm({a, b}, 1.0) == Approx(5.0));
  CHECK(a.grad()[0].item<double>() == Approx(0.6).epsilon(1e-5));
  CHECK(b.grad()[0].item<double>() == Approx(0.8).epsilon(1e-5));
  CHECK(ClipGradNorm({a, b}, 0) == Approx(1.0).epsilon(1e-5));
}

TEST_CASE("loss scaler backs off on overflow and grows after an interval", "[lora_sd]") {
  LossScaler s;
  s.enabled = true;
  s.scale = 8;
  s.growth_interval = 2;
  torch::Tensor a = torch::zeros({1}).requires_grad_(true);
  a.mutable_grad() = torch::tensor({16.0f});
  CHECK(s.UnscaleAndCheck({a}));
  CHECK(a.grad().item<float>() == 2.0f);
  s.Update(true);
  s.Update(true);
  CHECK(s.scale == 16);
  a.mutable_grad() = torch::tensor({INFINITY});
  CHECK_FALSE(s.UnscaleAndCheck({a}));
  s.Update(false);
  CHECK(s.scale == 8);
  LossScaler off;
  a.mutable_grad() = torch::tensor({INFINITY});
  CHECK(off.UnscaleAndCheck({a}));
}
