// The seam between a denoising network and everything that uses one: the training loop and its
// objective, the samplers, class-image generation, the LoRA files and the model loader hold a
// Denoiser, never a concrete network. A family (the SD 1.x/2.x/SDXL UNet in models/unet/; FLUX.1
// next) implements it in its own folder and registers in models/loader/denoisers.cc.
//
//   Forward(x_t [B,C,h,w], t [B], cond) -> [B,C,h,w]     what the objective regresses onto
//   cond: text [B,T,D] per-token states; pooled [B,P]; time_ids [B,6]; guidance [B] (as
//         shape() says)
//   t: DDPM timesteps (kDdpm) or σ in [0,1] (kFlowMatch), as objective() says
//
// Contract: a Denoiser owns its network (a torch::nn::Module with frozen base weights placed as
// placement() says) and outlives the LoRA adapters attached to its targets (DenoiserLora). Its
// base weights never train; only LoRA adapters on LoraAdapters()'s targets do. Forward runs in
// whatever autograd and autocast mode the caller sets; errors in it are libtorch exceptions,
// caught by the caller's CatchTorch. Not thread-safe.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <string>

#include "agent/train/denoiser/denoiser_shape.h"
#include "agent/train/nn/lora_adapters.h"
#include "agent/train/nn/placement.h"
#include "agent/train/nn/torch_io.h"

namespace gleaner::train {

// What conditions a denoiser besides the noisy latents and the timestep. Tensors a family does
// not use stay undefined (shape() says which it needs).
struct Conditioning {
  torch::Tensor text;      // [B,T,context_dim] per-token text states
  torch::Tensor pooled;    // [B,pooled_dim] pooled text embedding (SDXL)
  torch::Tensor time_ids;  // [B,6] SDXL micro-conditioning: orig_h, orig_w, crop_t, crop_l, h, w
  torch::Tensor guidance;  // [B] (FLUX dev) distilled guidance scale
};

// How training noises latents and what the output is regressed onto (training/objective.h).
enum class ObjectiveKind {
  kDdpm,       // discrete DDPM timesteps; target ε or v (the job's prediction_type)
  kFlowMatch,  // rectified flow: x_t = (1-σ)x + σε, t = σ in [0,1]; target ε - x (FLUX)
};

class Denoiser {
 public:
  virtual ~Denoiser() = default;

  // The family's name ("sd-unet"), as LoRA metadata and messages name it.
  virtual std::string family() const = 0;
  virtual DenoiserShape shape() const = 0;
  virtual ObjectiveKind objective() const = 0;
  virtual const BasePlacement& placement() const = 0;
  // The network (for train/eval mode, devices and parameter walks).
  virtual torch::nn::Module& module() = 0;

  virtual torch::Tensor Forward(const torch::Tensor& noisy, const torch::Tensor& timesteps,
                                const Conditioning& cond) = 0;
  // Recompute blocks in backward instead of keeping their activations.
  virtual void SetGradientCheckpointing(bool on) = 0;

  // Which layers get fresh LoRA (LoraAdaptersFor without a file): "default" (the family's usual
  // targets: the UNet's attention projections, diffusers' FLUX targets) or another set the family
  // names (FLUX: "all", every Linear of its blocks). InvalidArgument for a name it does not know.
  virtual Status SetLoraTargets(const std::string& targets) = 0;
  // The LoRA targets with the names LoRA files give them. `file`, when given, is a LoRA file
  // being read: a family whose files come in several naming flavours picks the file's.
  virtual LoraAdapters LoraAdaptersFor(const TensorMap* file = nullptr) = 0;
  // Safetensors metadata that describes an exported LoRA of this family for the tools that load
  // it (target_modules; kohya's ss_base_model_version, modelspec.architecture).
  virtual std::map<std::string, std::string> LoraFileMetadata() const = 0;
};

}  // namespace gleaner::train
