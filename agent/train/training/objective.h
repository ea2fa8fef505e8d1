// The training objective of a denoiser (denoiser/denoiser.h: ObjectiveKind): how a batch of
// clean latents is noised, what the denoiser's output is regressed onto, and how each example's
// squared error is weighted.
//
//   kDdpm (the UNet family; diffusers' train_dreambooth_lora):
//     noise ε ~ N(0, I) [B,C,h,w]; with noise_offset: ε += noise_offset · N(0, I) [B,C,1,1]
//     t ~ U{0 .. 999}; ᾱ_t from the scaled-linear schedule (sampling/noise_schedule.h)
//     x_t = √ᾱ_t · x_0 + √(1-ᾱ_t) · ε
//     target = ε (prediction_type "epsilon") or v = √ᾱ_t · ε − √(1-ᾱ_t) · x_0 ("v_prediction")
//     loss_i = mean((pred_i − target_i)²), with snr_gamma > 0 times min(SNR, γ)/SNR (ε) or
//              min(SNR, γ)/(SNR + 1) (v), SNR = ᾱ_t / (1-ᾱ_t)   (Min-SNR weighting)
//
//   kFlowMatch (FLUX.1; diffusers' train_dreambooth_lora_flux.py, kohya's flux_train_network):
//     noise ε ~ N(0, I) [B,C,h,w]
//     u ~ the weighting_scheme's density (logit_normal, mode; else uniform) [B]
//     i = floor(u · num_train_timesteps); σ = the scheduler's training table at i
//     timestep_shift static: σ ← s·σ / (1 + (s−1)·σ)  (s = discrete_flow_shift)
//                    resolution: σ ← e^μ / (e^μ + 1/σ − 1), μ from the image token count
//                                (h/2 · w/2) as FluxPipeline's schedule
//     x_σ = (1 − σ) · x_0 + σ · ε;  the denoiser is told σ (it scales by 1000 itself)
//     target = ε − x_0
//     loss_i = mean((pred_i − target_i)²) · w(σ_i), w from weighting_scheme (sigma_sqrt: σ^-2,
//              cosmap: 2 / (π (1 − 2σ + 2σ²)); else 1)
//
// Contract: every random draw comes from the caller's CPU generator, in the order above (noise,
// offset noise, timesteps; noise, density), so CPU and CUDA runs see the same numbers and a
// resumed run continues bit-identically. Tensors are moved to the objective's device. Not
// thread-safe.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>

#include "agent/train/denoiser/denoiser.h"
#include "agent/train/sampling/flow_match.h"
#include "agent/train/training/flow_match_timesteps.h"
#include "shared/job_params.h"

namespace gleaner::train::training {

// One batch, noised: the denoiser's inputs and what its output is compared with.
struct NoisedLatents {
  torch::Tensor noisy;      // [B,C,h,w] x_t
  torch::Tensor timesteps;  // [B] what the denoiser is told
  torch::Tensor target;     // [B,C,h,w]
  torch::Tensor weight;     // [B] per-example loss weight, or undefined (1)
};

class Objective {
 public:
  // scheduler_config: the model's scheduler/scheduler_config.json (kFlowMatch: its training
  // table; an empty object: FLUX.1's defaults). kDdpm reads the scaled-linear schedule.
  static Result<std::unique_ptr<Objective>> Create(ObjectiveKind kind, const LoraSdParams& params,
                                                   const Json& scheduler_config,
                                                   const torch::Device& device);

  // latents [B,C,h,w] on the device; draws from `gen` (see above).
  NoisedLatents Noise(const torch::Tensor& latents, torch::Generator& gen) const;
  // Per-example loss [B] (fp32) of a prediction for `x`.
  torch::Tensor Loss(const torch::Tensor& prediction, const NoisedLatents& x) const;
  ObjectiveKind kind() const { return kind_; }

 private:
  Objective(ObjectiveKind kind, const LoraSdParams& params, const torch::Device& device);
  NoisedLatents NoiseDdpm(const torch::Tensor& latents, torch::Generator& gen) const;
  NoisedLatents NoiseFlowMatch(const torch::Tensor& latents, torch::Generator& gen) const;

  ObjectiveKind kind_;
  LoraSdParams params_;
  // kFlowMatch: the scheduler config, its training table, the density and loss weighting.
  sampling::FlowMatchConfig flow_;
  FlowMatchTable table_;
  WeightingScheme scheme_;
  std::string prediction_type_;
  double noise_offset_ = 0, snr_gamma_ = 0;
  torch::Device device_;
  torch::Tensor alphas_cumprod_;  // kDdpm: [1000] on the device
};

}  // namespace gleaner::train::training
