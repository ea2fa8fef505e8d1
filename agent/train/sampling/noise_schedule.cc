#include "agent/train/sampling/noise_schedule.h"

#include <algorithm>
#include <cmath>

namespace gleaner::train::sampling {
namespace {

// diffusers' betas_for_alpha_bar (cosine, max_beta 0.999): computed in double, stored as fp32.
torch::Tensor SquaredCosCapV2(int64_t n) {
  auto alpha_bar = [](double t) {
    double c = std::cos((t + 0.008) / 1.008 * M_PI / 2);
    return c * c;
  };
  std::vector<float> betas(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    double t1 = double(i) / double(n), t2 = double(i + 1) / double(n);
    betas[size_t(i)] = float(std::min(1 - alpha_bar(t2) / alpha_bar(t1), 0.999));
  }
  return torch::tensor(betas, torch::kFloat32);
}

// diffusers' rescale_zero_terminal_snr (Algorithm 1 of Lin et al.), in fp32.
torch::Tensor RescaleZeroTerminalSnr(const torch::Tensor& betas) {
  torch::Tensor sqrt_ac = torch::cumprod(1.0 - betas, 0).sqrt();
  torch::Tensor first = sqrt_ac[0].clone(), last = sqrt_ac[-1].clone();
  sqrt_ac = (sqrt_ac - last) * (first / (first - last));
  torch::Tensor ac = sqrt_ac.pow(2);
  torch::Tensor alphas = torch::cat({ac.slice(0, 0, 1), ac.slice(0, 1) / ac.slice(0, 0, -1)});
  return 1 - alphas;
}

}  // namespace

torch::Tensor Betas(const NoiseSchedule& s) {
  torch::Tensor betas;
  if (!s.trained_betas.empty()) {
    std::vector<float> b(s.trained_betas.begin(), s.trained_betas.end());
    betas = torch::tensor(b, torch::kFloat32);
  } else if (s.beta_schedule == "scaled_linear") {
    betas = torch::linspace(std::sqrt(s.beta_start), std::sqrt(s.beta_end), s.num_train_timesteps,
                            torch::kFloat32)
                .pow(2);
  } else if (s.beta_schedule == "squaredcos_cap_v2") {
    betas = SquaredCosCapV2(s.num_train_timesteps);
  } else {
    betas = torch::linspace(s.beta_start, s.beta_end, s.num_train_timesteps, torch::kFloat32);
  }
  return s.rescale_betas_zero_snr ? RescaleZeroTerminalSnr(betas) : betas;
}

torch::Tensor AlphasCumprod(const NoiseSchedule& s) {
  return torch::cumprod(1.0 - Betas(s), 0);
}

torch::Tensor ScaledLinearAlphasCumprod(int64_t n, double beta_start, double beta_end) {
  NoiseSchedule s;
  s.num_train_timesteps = n;
  s.beta_start = beta_start;
  s.beta_end = beta_end;
  s.beta_schedule = "scaled_linear";
  return AlphasCumprod(s);
}

}  // namespace gleaner::train::sampling
