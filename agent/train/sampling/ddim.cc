#include "agent/train/sampling/ddim.h"

namespace gleaner::train::sampling {

using torch::Tensor;

DdimScheduler::DdimScheduler(const SchedulerConfig& c) : Scheduler(c) {
  final_alpha_cumprod_ = c.set_alpha_to_one ? torch::tensor(1.0f) : alphas_cumprod_[0].clone();
}

Status DdimScheduler::SetTimesteps(int64_t n) {
  const int64_t train = config_.noise.num_train_timesteps;
  if (n < 1 || n > train) {
    return Status::Invalid("number of sampling steps must be in [1, " + std::to_string(train) +
                           "], got " + std::to_string(n));
  }
  std::vector<int64_t> ts;
  for (double t : SpacedTimesteps(n, /*round_linspace=*/true)) {
    if (t < 0 || t >= double(train)) {
      return Status::Invalid("DDIM with " + std::to_string(n) + " steps and steps_offset " +
                             std::to_string(config_.steps_offset) + " reaches timestep " +
                             std::to_string(int64_t(t)) + ", outside [0, " + std::to_string(train) +
                             ")");
    }
    ts.push_back(int64_t(t));
  }
  timesteps_ = torch::tensor(ts, torch::kInt64);
  return Status::Ok();
}

int64_t DdimScheduler::prev_timestep(int64_t i) const {
  return timesteps_[i].item<int64_t>() - config_.noise.num_train_timesteps / num_inference_steps();
}

Tensor DdimScheduler::alpha_prod_t(int64_t i) const {
  return alphas_cumprod_[timesteps_[i].item<int64_t>()];
}

Tensor DdimScheduler::alpha_prod_t_prev(int64_t i) const {
  int64_t prev = prev_timestep(i);
  return prev >= 0 ? alphas_cumprod_[prev] : final_alpha_cumprod_;
}

StepOutput DdimScheduler::Step(const Tensor& model_output, int64_t i, const Tensor& x) const {
  Tensor a_t = alpha_prod_t(i).to(x.device());
  Tensor a_prev = alpha_prod_t_prev(i).to(x.device());
  Tensor b_t = 1 - a_t;
  Tensor x0, eps;
  switch (config_.prediction_type) {
    case Prediction::kEpsilon:
      x0 = (x - b_t.pow(0.5) * model_output) / a_t.pow(0.5);
      eps = model_output;
      break;
    case Prediction::kSample:
      x0 = model_output;
      eps = (x - a_t.pow(0.5) * x0) / b_t.pow(0.5);
      break;
    case Prediction::kVPrediction:
      x0 = a_t.pow(0.5) * x - b_t.pow(0.5) * model_output;
      eps = a_t.pow(0.5) * model_output + b_t.pow(0.5) * x;
      break;
  }
  if (config_.clip_sample) x0 = x0.clamp(-config_.clip_sample_range, config_.clip_sample_range);
  // eta = 0: no variance term, the direction to x_t is √(1−ᾱ_prev)·ε.
  Tensor direction = (1 - a_prev).pow(0.5) * eps;
  return {a_prev.pow(0.5) * x0 + direction, x0};
}

}  // namespace gleaner::train::sampling
