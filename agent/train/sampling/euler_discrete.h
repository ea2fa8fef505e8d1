// diffusers' EulerDiscreteScheduler (SDXL's default sampler) with s_churn = 0: deterministic.
//
// Contract: as Scheduler (scheduler.h). σ_t = √((1−ᾱ_t)/ᾱ_t) interpolated linearly at the
// (fp32) timesteps, plus a final σ of 0 or σ_0 (final_sigmas_type). With epsilon prediction
// x₀ = x − σ_i·ε, d = (x − x₀)/σ_i, x_{i+1} = x + d·(σ_{i+1} − σ_i).
#pragma once

#include "agent/train/sampling/scheduler.h"

namespace gleaner::train::sampling {

class EulerDiscreteScheduler : public Scheduler {
 public:
  explicit EulerDiscreteScheduler(const SchedulerConfig& c);
  Status SetTimesteps(int64_t n) override;
  // √(σ_max² + 1) for "leading" spacing, σ_max otherwise.
  double init_noise_sigma() const override { return init_noise_sigma_; }
  torch::Tensor ScaleModelInput(const torch::Tensor& x, int64_t i) const override;
  StepOutput Step(const torch::Tensor& model_output, int64_t i,
                  const torch::Tensor& x) const override;
  // [n + 1] fp32, CPU.
  const torch::Tensor& sigmas() const { return sigmas_; }

 private:
  torch::Tensor sigmas_;
  double init_noise_sigma_ = 1.0;
};

}  // namespace gleaner::train::sampling
