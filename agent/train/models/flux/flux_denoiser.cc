#include "agent/train/models/flux/flux_denoiser.h"

#include "agent/train/models/flux/flux_lora.h"
#include "agent/train/models/flux/flux_packing.h"

namespace gleaner::train::flux {

using torch::Tensor;

Result<FluxLoraTargets> ParseFluxLoraTargets(const std::string& value) {
  if (value.empty() || value == "default") return FluxLoraTargets::kDiffusers;
  if (value == "all") return FluxLoraTargets::kAll;
  return Status::Invalid("lora_targets must be \"default\" or \"all\", got \"" + value + "\"");
}

DenoiserShape ShapeOf(const FluxConfig& c) {
  DenoiserShape s;
  s.latent_channels = c.in_channels / 4;
  s.context_dim = c.joint_attention_dim;
  s.pooled_dim = c.pooled_projection_dim;
  s.guidance = c.guidance_embeds;
  s.sample_height = s.sample_width = 128;
  return s;
}

DenoiserShape FluxDenoiser::shape() const {
  return ShapeOf(net_->config());
}

Tensor FluxDenoiser::Forward(const Tensor& noisy, const Tensor& sigmas, const Conditioning& cond) {
  TORCH_CHECK(noisy.dim() == 4, "FLUX latents must be [B, C, h, w], got ", noisy.sizes());
  const int64_t h = noisy.size(2), w = noisy.size(3);
  TORCH_CHECK(cond.text.defined() && cond.pooled.defined(),
              "FLUX needs text (T5) states and a pooled (CLIP) embedding");
  Tensor tokens = PackLatents(noisy);
  Tensor img_ids = LatentImageIds(h / 2, w / 2, noisy.device());
  Tensor txt_ids = torch::zeros({cond.text.size(1), 3}, img_ids.options());
  Tensor out = net_->forward(tokens, cond.text, cond.pooled, sigmas, img_ids, txt_ids,
                             net_->config().guidance_embeds ? cond.guidance : Tensor());
  return UnpackLatents(out, h, w);
}

LoraAdapters FluxDenoiser::LoraAdaptersFor(const TensorMap* file) {
  return FluxLoraAdapters(*net_, lora_targets_, file);
}

std::map<std::string, std::string> FluxDenoiser::LoraFileMetadata() const {
  return FluxLoraMetadata(net_->config(), lora_targets_);
}

Result<std::shared_ptr<FluxDenoiser>> BuildFluxDenoiser(const FluxConfig& config,
                                                        const TensorMap& weights,
                                                        const BasePlacement& placement) {
  std::shared_ptr<FluxTransformer> net;
  Status s = CatchTorch("building the FLUX transformer", [&]() -> Status {
    net = std::make_shared<FluxTransformer>(config, placement);
    return LoadFluxStateDict(*net, weights);
  });
  if (!s.ok()) return s;
  return std::make_shared<FluxDenoiser>(std::move(net));
}

}  // namespace gleaner::train::flux
