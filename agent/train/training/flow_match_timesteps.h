// How flow-matching training (FLUX.1) picks its timesteps and weighs its loss, as diffusers'
// train_dreambooth_lora_flux.py does: a density sample u in [0, 1) per image, the timestep
// table of FlowMatchEulerDiscreteScheduler indexed at u · num_train_timesteps, that timestep's
// sigma, and a per-sample loss weight of the sigma (compute_loss_weighting_for_sd3).
//
// Contract: values are fp32 and computed with diffusers' operations in diffusers' order, so
// they equal its tensors (flowmatch-ref-a). Tensors are CPU fp32 unless said otherwise; the
// draws come from the generator passed (a CPU generator: the same numbers on every device, and
// the same as torch with torch.Generator().manual_seed alike). Names from job parameters are
// parsed into the enums with an InvalidArgument naming the value. Pure functions; thread-safe
// as far as the generator is not shared.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>

#include "agent/train/sampling/flow_match.h"
#include "shared/status.h"

namespace gleaner::train::training {

// The scheduler's tables right after construction: timesteps N, N-1, ..., 1 (fp32) and their
// sigmas t/N, shifted statically by `shift` unless use_dynamic_shifting (then unshifted), with
// timesteps = sigmas · N. Both [num_train_timesteps] fp32, no terminal sigma.
struct FlowMatchTable {
  torch::Tensor timesteps;
  torch::Tensor sigmas;
};
FlowMatchTable TrainTable(const sampling::FlowMatchConfig& config);

// compute_density_for_timestep_sampling's schemes.
enum class Density { kUniform, kLogitNormal, kMode };
// compute_loss_weighting_for_sd3's schemes.
enum class LossWeighting { kNone, kSigmaSqrt, kCosmap };

// diffusers' single `weighting_scheme` switch sets both: "logit_normal" and "mode" pick the
// density (with no loss weight), "sigma_sqrt" and "cosmap" the loss weight (with a uniform
// density), "none" neither. InvalidArgument naming anything else.
struct WeightingScheme {
  Density density = Density::kUniform;
  LossWeighting weighting = LossWeighting::kNone;
};
Result<WeightingScheme> ParseWeightingScheme(const std::string& name);
// "uniform" | "logit_normal" | "mode", and "none" | "sigma_sqrt" | "cosmap", one at a time.
Result<Density> ParseDensity(const std::string& name);
Result<LossWeighting> ParseLossWeighting(const std::string& name);

// u [batch] fp32 in [0, 1] from `generator`: uniform rand; logit_normal sigmoid(normal(mean,
// std)); mode 1 − v − mode_scale·(cos(π·v/2)² − 1 + v) with v uniform. One draw of `batch`
// values, as torch.rand / torch.normal make it.
// InvalidArgument unless the density's parameters are usable: logit_normal a finite mean and a
// std > 0, mode a finite mode_scale in [-1000, 1000] (what SampleDensity then needs).
Status CheckDensityParams(Density density, double logit_mean, double logit_std, double mode_scale);
torch::Tensor SampleDensity(Density density, double logit_mean, double logit_std, double mode_scale,
                            int64_t batch, torch::Generator generator);

// The training rule: indices = long(u · N) (clamped to [0, N − 1], where diffusers would index
// out of range for u = 1), timesteps = table.timesteps[indices] and sigmas =
// table.sigmas[indices] (the sigma of that timestep). Both [batch] fp32.
struct TimestepDraw {
  torch::Tensor indices;    // int64
  torch::Tensor timesteps;  // what the transformer gets, divided by 1000 (it multiplies back)
  torch::Tensor sigmas;     // noisy input (1 − σ)·x + σ·ε, target ε − x
};
TimestepDraw TimestepsForU(const FlowMatchTable& table, const torch::Tensor& u);

// Optional shifts of training sigmas (kohya's discrete_flow_shift and flux_shift), fp32:
// static s·σ / (1 + (s − 1)·σ); resolution-dependent: sampling::TimeShift's rule with mu =
// CalculateShift(config, image_seq_len) (exponential or linear per the config).
torch::Tensor StaticShiftSigmas(const torch::Tensor& sigmas, double shift);
torch::Tensor ResolutionShiftSigmas(const sampling::FlowMatchConfig& config,
                                    const torch::Tensor& sigmas, int64_t image_seq_len);

// Per-sample loss weights of sigmas (any shape, float): none 1; sigma_sqrt σ⁻²; cosmap
// 2 / (π·(1 − 2σ + 2σ²)). fp32 for fp32 sigmas.
torch::Tensor LossWeights(LossWeighting weighting, const torch::Tensor& sigmas);

}  // namespace gleaner::train::training
