// A diffusion sampler's schedule and update rule: the part of diffusers' EulerDiscreteScheduler /
// DDIMScheduler that a sampling loop (sampling_loop.h) drives.
//
// Contract: after SetTimesteps(n) succeeds, timesteps() holds the n model timesteps in sampling
// order (as diffusers: fp32 for Euler, int64 for DDIM). ScaleModelInput and Step take the step
// index i in [0, n) of that order instead of diffusers' hidden step counter, so they are const
// and a loop may be replayed. Tensors are on any device; schedule values are fp32 and every
// update is computed in fp32 exactly as diffusers computes it (same ops, same order), so a
// trajectory equals diffusers' up to the last bit of libtorch's kernels. Not thread-safe while
// SetTimesteps runs; const methods may be called concurrently.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "agent/train/sampling/scheduler_config.h"
#include "shared/status.h"

namespace gleaner::train::sampling {

struct StepOutput {
  torch::Tensor prev_sample;           // x_{t-1}, fp32
  torch::Tensor pred_original_sample;  // the step's estimate of x₀
};

class Scheduler {
 public:
  virtual ~Scheduler() = default;
  // InvalidArgument unless 1 <= n <= num_train_timesteps.
  virtual Status SetTimesteps(int64_t n) = 0;
  const torch::Tensor& timesteps() const { return timesteps_; }
  int64_t num_inference_steps() const { return timesteps_.defined() ? timesteps_.size(0) : 0; }
  // The timestep the model sees at step i, as a double (exact: integers or fp32 values).
  double timestep(int64_t i) const { return timesteps_[i].item<double>(); }
  // x_T = noise · init_noise_sigma (an fp32 value).
  virtual double init_noise_sigma() const = 0;
  // The model's input at step i (Euler: x / √(σ²+1); DDIM: x).
  virtual torch::Tensor ScaleModelInput(const torch::Tensor& x, int64_t i) const = 0;
  // One update from step i's model output (in the config's prediction type).
  virtual StepOutput Step(const torch::Tensor& model_output, int64_t i,
                          const torch::Tensor& x) const = 0;
  const SchedulerConfig& config() const { return config_; }
  // ᾱ_t of the training schedule, [num_train_timesteps] fp32.
  const torch::Tensor& alphas_cumprod() const { return alphas_cumprod_; }

 protected:
  explicit Scheduler(const SchedulerConfig& c);
  // diffusers' set_timesteps spacing for n steps (numpy's arange/linspace/round-half-even
  // reproduced); linspace values are rounded to integers when `round_linspace`.
  std::vector<double> SpacedTimesteps(int64_t n, bool round_linspace) const;
  SchedulerConfig config_;
  torch::Tensor alphas_cumprod_;
  torch::Tensor timesteps_;
};

// An Euler or DDIM scheduler for a parsed config (config.kind picks which).
std::unique_ptr<Scheduler> MakeScheduler(const SchedulerConfig& config);

}  // namespace gleaner::train::sampling
