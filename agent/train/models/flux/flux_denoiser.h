// The FLUX.1 family as a Denoiser (denoiser/denoiser.h: family "flux", objective kFlowMatch):
// Forward takes latents [B,C,h,w] (C = in_channels/4), σ [B] in [0,1] and the conditioning
// (text = T5 states [B,T,joint], pooled = CLIP-L pooled [B,P], guidance [B] when the config has
// guidance_embeds), packs 2x2 latent patches into tokens with (0,row,col) image ids and zero text
// ids (flux_packing.h), runs the transformer and unpacks its output to [B,C,h,w].
//
// LoRA: the targets are the diffusers default of train_dreambooth_lora_flux.py (attn.to_q/k/v,
// to_out.0, add_q/k/v_proj, to_add_out, ff(.context).net.0.proj/net.2 inside the blocks) or, with
// FluxLoraTargets::kAll (a job's lora_targets "all", kohya's choice), every Linear of the blocks.
// Files: PEFT names "transformer.<module>.lora_A/B.weight" and kohya names over the single-file
// layout (flux_lora.h). A file being read picks its own targets (every block Linear it names).
//
// Contract: owns the transformer; the base is frozen; the LoRA adapters refer to its layers (the
// denoiser outlives them). Not thread-safe.
#pragma once

#include <torch/torch.h>

#include <map>
#include <memory>
#include <string>

#include "agent/train/denoiser/denoiser.h"
#include "agent/train/models/flux/flux_config.h"
#include "agent/train/models/flux/flux_transformer.h"

namespace gleaner::train::flux {

enum class FluxLoraTargets { kDiffusers, kAll };
// "" or "default" -> kDiffusers, "all" -> kAll; anything else an InvalidArgument.
Result<FluxLoraTargets> ParseFluxLoraTargets(const std::string& value);

class FluxDenoiser : public Denoiser {
 public:
  explicit FluxDenoiser(std::shared_ptr<FluxTransformer> transformer)
      : net_(std::move(transformer)) {}

  FluxTransformer& transformer() { return *net_; }
  void set_lora_targets(FluxLoraTargets t) { lora_targets_ = t; }
  FluxLoraTargets lora_targets() const { return lora_targets_; }

  std::string family() const override { return "flux"; }
  DenoiserShape shape() const override;
  ObjectiveKind objective() const override { return ObjectiveKind::kFlowMatch; }
  const BasePlacement& placement() const override { return net_->placement(); }
  torch::nn::Module& module() override { return *net_; }
  torch::Tensor Forward(const torch::Tensor& noisy, const torch::Tensor& sigmas,
                        const Conditioning& cond) override;
  void SetGradientCheckpointing(bool on) override { net_->set_gradient_checkpointing(on); }
  Status SetLoraTargets(const std::string& targets) override {
    Result<FluxLoraTargets> t = ParseFluxLoraTargets(targets);
    if (!t.ok()) return t.status();
    lora_targets_ = *t;
    return Status::Ok();
  }
  LoraAdapters LoraAdaptersFor(const TensorMap* file = nullptr) override;
  std::map<std::string, std::string> LoraFileMetadata() const override;

 private:
  std::shared_ptr<FluxTransformer> net_;
  FluxLoraTargets lora_targets_ = FluxLoraTargets::kDiffusers;
};

// The input sizes of a FLUX denoiser of config c (1024x1024 images: 128x128 latents).
DenoiserShape ShapeOf(const FluxConfig& c);
// Builds the transformer without storage on `placement` and fills it from diffusers-named
// `weights` (LoadFluxStateDict).
Result<std::shared_ptr<FluxDenoiser>> BuildFluxDenoiser(const FluxConfig& config,
                                                        const TensorMap& weights,
                                                        const BasePlacement& placement);

}  // namespace gleaner::train::flux
