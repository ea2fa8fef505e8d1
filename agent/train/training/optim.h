// Training math: learning-rate schedules, AdamW, loss scaling (what the loss is: objective.h).
//
// Contract: all state that must survive a resume is plain data (AdamW moments as tensors, step
// counters, scaler scale/tracker) that the checkpoint code saves and restores exactly; nothing
// here draws random numbers. Not thread-safe.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "agent/train/nn/torch_io.h"

namespace gleaner::train::training {

// Multiplier of the base learning rate before optimizer step `step` (0-based), as diffusers'
// get_scheduler: constant, constant_with_warmup, linear, cosine (half cycle).
double LrMultiplier(const std::string& name, int64_t step, int64_t warmup, int64_t total);
bool IsKnownLrScheduler(const std::string& name);

struct AdamWOptions {
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 1e-2;
};

// AdamW as torch.optim.AdamW (decoupled weight decay, bias correction, non-amsgrad).
class AdamW {
 public:
  AdamW(std::vector<torch::Tensor> params, AdamWOptions o);
  void Step(double lr);
  int64_t step() const { return step_; }
  // exp_avg.<i>, exp_avg_sq.<i> (i = parameter index) plus a scalar "step".
  TensorMap State() const;
  Status Restore(const TensorMap& state);

 private:
  std::vector<torch::Tensor> params_, m_, v_;
  AdamWOptions o_;
  int64_t step_ = 0;
};

// Global L2 norm of all gradients; scales them down to max_norm if larger (max_norm <= 0: only
// measures). Returns the norm before clipping.
double ClipGradNorm(const std::vector<torch::Tensor>& params, double max_norm);

// Dynamic loss scaling for fp16 (disabled = scale 1, never skips).
struct LossScaler {
  bool enabled = false;
  double scale = 65536.0;
  int64_t growth_tracker = 0;
  int64_t growth_interval = 2000;
  // Unscales grads in place; returns false (and backs off) if any is non-finite.
  bool UnscaleAndCheck(const std::vector<torch::Tensor>& params);
  void Update(bool finite);
};

}  // namespace gleaner::train::training
