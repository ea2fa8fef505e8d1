// diffusers' DDIMScheduler with eta = 0 (deterministic DDIM, SD 1.x's usual validation sampler).
//
// Contract: as Scheduler (scheduler.h). Step i at timestep t goes to prev = t − train/n:
// x₀ from the model output, optionally clipped to ±clip_sample_range, then
// x_prev = √ᾱ_prev·x₀ + √(1−ᾱ_prev)·ε, with ᾱ_prev = 1 or ᾱ_0 (set_alpha_to_one) when prev < 0.
// SetTimesteps refuses a step count whose timesteps (with steps_offset) leave the training range.
#pragma once

#include "agent/train/sampling/scheduler.h"

namespace gleaner::train::sampling {

class DdimScheduler : public Scheduler {
 public:
  explicit DdimScheduler(const SchedulerConfig& c);
  Status SetTimesteps(int64_t n) override;
  double init_noise_sigma() const override { return 1.0; }
  torch::Tensor ScaleModelInput(const torch::Tensor& x, int64_t) const override { return x; }
  StepOutput Step(const torch::Tensor& model_output, int64_t i,
                  const torch::Tensor& x) const override;
  // The timestep step i goes to (negative after the last step), and ᾱ at both ends (0-d fp32).
  int64_t prev_timestep(int64_t i) const;
  torch::Tensor alpha_prod_t(int64_t i) const;
  torch::Tensor alpha_prod_t_prev(int64_t i) const;

 private:
  torch::Tensor final_alpha_cumprod_;
};

}  // namespace gleaner::train::sampling
