// A diffusers scheduler config (`scheduler/scheduler_config.json` of a model folder), read for one
// of the two samplers the trainer has: EulerDiscreteScheduler or DDIMScheduler.
//
// Contract: ParseSchedulerConfig reads the config as diffusers' `Sampler.from_config(config)`
// does: fields the target sampler does not know are ignored, missing fields take that sampler's
// diffusers defaults (they differ: Euler defaults to "linspace" spacing, DDIM to "leading" with
// clip_sample and set_alpha_to_one true). `_class_name` must be a DDPM-family scheduler whose
// config diffusers declares compatible (PNDM, DDPM, Euler, DDIM, ...); any other class, and any
// feature this implementation does not have (Karras/exponential/beta sigmas, thresholding,
// continuous timesteps, log-linear interpolation), is an InvalidArgument that names it.
#pragma once

#include <cstdint>
#include <string>

#include "agent/train/sampling/noise_schedule.h"
#include "shared/json.h"
#include "shared/status.h"

namespace gleaner::train::sampling {

enum class SamplerKind { kEuler, kDdim };
// What the model predicts: ε, v = √ᾱ·ε − √(1−ᾱ)·x₀, or x₀ itself ("sample").
enum class Prediction { kEpsilon, kVPrediction, kSample };
// How inference timesteps are spread over the training timesteps (Lin et al. 2023, table 2).
enum class Spacing { kLeading, kTrailing, kLinspace };

struct SchedulerConfig {
  SamplerKind kind = SamplerKind::kEuler;
  NoiseSchedule noise;
  Prediction prediction_type = Prediction::kEpsilon;
  Spacing timestep_spacing = Spacing::kLinspace;
  int64_t steps_offset = 0;
  // Euler: the last sigma is 0 ("zero") or σ at t = 0 ("sigma_min").
  bool final_sigma_zero = true;
  // DDIM: ᾱ after the last step is 1 (true) or ᾱ_0 (false); x₀ clipped to ±clip_sample_range.
  bool set_alpha_to_one = true;
  bool clip_sample = true;
  double clip_sample_range = 1.0;
};

// "euler" | "ddim".
Result<SamplerKind> ParseSamplerKind(const std::string& name);
// The sampler a config's `_class_name` names (EulerDiscreteScheduler or DDIMScheduler).
Result<SamplerKind> SamplerKindOfConfig(const Json& config);
Result<SchedulerConfig> ParseSchedulerConfig(const Json& config, SamplerKind kind);
// Reads and parses a scheduler_config.json file.
Result<SchedulerConfig> LoadSchedulerConfig(const std::string& path, SamplerKind kind);

}  // namespace gleaner::train::sampling
