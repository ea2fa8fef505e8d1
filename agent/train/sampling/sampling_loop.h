// The denoising loop of diffusers' text-to-image pipelines, with the model plugged in as a
// callback (a denoiser, or a fake model in tests), and classifier-free guidance.
//
// Contract: Sample() runs, for a scheduler whose SetTimesteps succeeded,
//   x = noise · init_noise_sigma
//   for i, t in enumerate(timesteps): x = Step(model(ScaleModelInput(x, i), t), i, x)
// exactly as StableDiffusion(XL)Pipeline does (x stays fp32). The model callback's error ends
// the loop and is returned (that is how a stop request or a failing denoiser aborts sampling). The
// observer, when given, sees every step before the next one starts. Same inputs, same device:
// same result.
#pragma once

#include <torch/torch.h>

#include <functional>

#include "agent/train/sampling/scheduler.h"
#include "shared/status.h"

namespace gleaner::train::sampling {

// The model's prediction (in the scheduler's prediction type) for input x_in [B,C,H,W] at
// timestep t (a 0-d tensor of the scheduler's timestep dtype).
using DenoiseFn =
    std::function<Result<torch::Tensor>(const torch::Tensor& x_in, const torch::Tensor& t)>;
// A model evaluated on the doubled batch [x; x] [2B,C,H,W] that returns the unconditional
// predictions in rows [0, B) and the conditional ones in rows [B, 2B), as diffusers' pipelines
// batch the negative and the positive prompt into one denoiser call.
using PairedDenoiseFn = DenoiseFn;

struct StepRecord {
  int64_t index;
  torch::Tensor timestep;              // 0-d
  torch::Tensor model_input;           // ScaleModelInput(x, i)
  torch::Tensor model_output;          // after guidance
  torch::Tensor pred_original_sample;  // x₀ estimate
  torch::Tensor sample;                // x after the step
};
using StepObserver = std::function<void(const StepRecord&)>;

// Classifier-free guidance: ε_u + g·(ε_c − ε_u).
torch::Tensor Guide(const torch::Tensor& uncond, const torch::Tensor& cond, double guidance_scale);
// A DenoiseFn that runs `paired` on [x; x] and guides its two halves. diffusers runs the
// conditional model alone when guidance_scale <= 1; callers do the same (no pairing then).
DenoiseFn WithGuidance(PairedDenoiseFn paired, double guidance_scale);

Result<torch::Tensor> Sample(const Scheduler& scheduler, const torch::Tensor& noise,
                             const DenoiseFn& model, const StepObserver& observe = nullptr);

}  // namespace gleaner::train::sampling
