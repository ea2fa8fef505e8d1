#include "agent/train/sampling/euler_discrete.h"

#include <cmath>

namespace gleaner::train::sampling {

using torch::Tensor;

EulerDiscreteScheduler::EulerDiscreteScheduler(const SchedulerConfig& c) : Scheduler(c) {
  // diffusers keeps the terminal ᾱ just above 0 so that σ_T stays finite.
  if (c.noise.rescale_betas_zero_snr) alphas_cumprod_[-1].fill_(std::pow(2.0, -24));
}

Status EulerDiscreteScheduler::SetTimesteps(int64_t n) {
  const int64_t train = config_.noise.num_train_timesteps;
  if (n < 1 || n > train) {
    return Status::Invalid("number of sampling steps must be in [1, " + std::to_string(train) +
                           "], got " + std::to_string(n));
  }
  std::vector<double> spaced = SpacedTimesteps(n, /*round_linspace=*/false);
  std::vector<float> ts(spaced.begin(), spaced.end());  // diffusers' timesteps are fp32
  // Training σ_t in fp32, then numpy's interp (in double) at each timestep.
  Tensor train_sigmas = ((1 - alphas_cumprod_) / alphas_cumprod_).pow(0.5).contiguous();
  const float* s = train_sigmas.data_ptr<float>();
  std::vector<float> sig(static_cast<size_t>(n) + 1);
  for (int64_t i = 0; i < n; ++i) {
    double x = ts[size_t(i)];
    double v;
    if (x <= 0) {
      v = s[0];
    } else if (x >= double(train - 1)) {
      v = s[train - 1];
    } else {
      int64_t j = int64_t(std::floor(x));
      double slope = double(s[j + 1]) - double(s[j]);  // xp spacing is 1
      v = x == double(j) ? double(s[j]) : slope * (x - double(j)) + double(s[j]);
    }
    sig[size_t(i)] = float(v);
  }
  sig[size_t(n)] = config_.final_sigma_zero ? 0.0f : s[0];
  timesteps_ = torch::tensor(ts, torch::kFloat32);
  sigmas_ = torch::tensor(sig, torch::kFloat32);
  float max_sigma = sigmas_.max().item<float>();
  init_noise_sigma_ = config_.timestep_spacing == Spacing::kLeading
                          ? double(std::sqrt(max_sigma * max_sigma + 1.0f))
                          : double(max_sigma);
  return Status::Ok();
}

Tensor EulerDiscreteScheduler::ScaleModelInput(const Tensor& x, int64_t i) const {
  Tensor sigma = sigmas_[i].to(x.device());
  return x / (sigma.pow(2) + 1).pow(0.5);
}

StepOutput EulerDiscreteScheduler::Step(const Tensor& model_output, int64_t i,
                                        const Tensor& x_in) const {
  Tensor x = x_in.to(torch::kFloat32);
  Tensor sigma = sigmas_[i].to(x.device());
  Tensor sigma_next = sigmas_[i + 1].to(x.device());
  Tensor x0;
  switch (config_.prediction_type) {
    case Prediction::kEpsilon:
      x0 = x - sigma * model_output;
      break;
    case Prediction::kVPrediction:
      x0 = model_output * (-sigma / (sigma.pow(2) + 1).pow(0.5)) + x / (sigma.pow(2) + 1);
      break;
    case Prediction::kSample:
      x0 = model_output;
      break;
  }
  Tensor derivative = (x - x0) / sigma;  // the ODE's dx/dσ
  Tensor prev = x + derivative * (sigma_next - sigma);
  return {prev.to(model_output.scalar_type()), x0};
}

}  // namespace gleaner::train::sampling
