// The DDPM noise schedule (betas, ᾱ_t) that training and sampling share: the one implementation
// of diffusers' beta schedules in the trainer.
//
// Contract: every tensor is CPU fp32 and computed exactly as diffusers' schedulers compute it
// (torch.linspace / betas_for_alpha_bar in fp32, 1 - β, cumprod in fp32), so ᾱ_t is bit-equal to
// `scheduler.alphas_cumprod` for the same config. Pure functions; a NoiseSchedule is plain data
// validated by ParseSchedulerConfig (scheduler_config.h), not here.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

namespace gleaner::train::sampling {

struct NoiseSchedule {
  int64_t num_train_timesteps = 1000;
  double beta_start = 0.0001;
  double beta_end = 0.02;
  // "linear" | "scaled_linear" | "squaredcos_cap_v2"; ignored when trained_betas is non-empty.
  std::string beta_schedule = "linear";
  std::vector<double> trained_betas;
  // Lin et al. 2023 (zero terminal SNR): ᾱ_T becomes 0.
  bool rescale_betas_zero_snr = false;
};

// β_t, [num_train_timesteps] fp32.
torch::Tensor Betas(const NoiseSchedule& s);
// ᾱ_t = Π (1 - β_i), [num_train_timesteps] fp32.
torch::Tensor AlphasCumprod(const NoiseSchedule& s);
// The SD 1.x/2.x/SDXL training schedule: "scaled_linear", β from 0.00085 to 0.012.
torch::Tensor ScaledLinearAlphasCumprod(int64_t n = 1000, double beta_start = 0.00085,
                                        double beta_end = 0.012);

}  // namespace gleaner::train::sampling
