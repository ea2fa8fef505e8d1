// UNet2DConditionModel (SD 1.x/2.x and SDXL) in libtorch, with LoRA-capable attention projections.
//
// It is the first denoiser family (denoiser/denoiser.h: "sd-unet"): Forward takes the
// conditioning bundle (text = encoder_hidden_states; SDXL: pooled = text_embeds, time_ids), its
// objective is DDPM, its LoRA targets and file names are unet_lora.h's.
//
// Contract: parameter names are exactly diffusers' state-dict keys, so LoadStateDict takes a
// diffusers safetensors file as is. The base weights are frozen (requires_grad false) and live
// where a BasePlacement says (nn/placement.h: device, compute dtype); only LoRA tensors
// (denoiser/denoiser_lora.h, fp32) are trained. Forward matches diffusers 0.31 (AttnProcessor math,
// GEGLU feed-forward; SDXL's "text_time" added conditioning as UNet2DConditionModel.get_aug_embed).
// Not thread-safe.
#pragma once

#include <torch/torch.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "agent/train/denoiser/denoiser.h"
#include "agent/train/models/unet/unet_config.h"
#include "agent/train/nn/checkpoint.h"
#include "agent/train/nn/lora_linear.h"
#include "agent/train/nn/placement.h"
#include "agent/train/nn/torch_io.h"

namespace gleaner::train::unet {

class DownBlock;
class MidBlock;
class UpBlock;
class TimestepMlp;

// SDXL's added conditioning (config.addition_embed_type "text_time"); leave undefined otherwise.
struct AddedCond {
  torch::Tensor text_embeds;  // [B, P] pooled text embedding (P = config.pooled_dim())
  torch::Tensor time_ids;     // [B, 6]: orig_h, orig_w, crop_top, crop_left, target_h, target_w
};

class UNet : public torch::nn::Module, public Denoiser {
 public:
  // Default-initialised fp32 CPU weights (RandomWeights and tests).
  explicit UNet(const UNetConfig& config);
  // Parameters without storage, to be filled by LoadStateDict on `placement`. While building,
  // at most one top-level block's default init exists at a time (no full fp32 copy).
  UNet(const UNetConfig& config, const BasePlacement& placement);

  // sample [B,C,H,W], timesteps [B] (or [] / [1], broadcast), encoder_hidden_states [B,T,D]
  // -> [B,out_channels,H,W]. `added` is required exactly when the config has text_time.
  torch::Tensor forward(const torch::Tensor& sample, const torch::Tensor& timesteps,
                        const torch::Tensor& encoder_hidden_states, const AddedCond& added = {});
  // Recompute resnets and transformer blocks in backward instead of keeping their activations.
  void set_gradient_checkpointing(bool on) { ckpt_.set_enabled(on); }
  // Every LoRA target (to_q, to_k, to_v, to_out.0 of every attention) by module path.
  std::vector<std::pair<std::string, LoraLinearImpl*>> LoraTargets();
  const UNetConfig& config() const { return config_; }
  const BasePlacement& placement() const override { return placement_; }

  // Denoiser (denoiser/denoiser.h).
  std::string family() const override { return "sd-unet"; }
  DenoiserShape shape() const override;
  ObjectiveKind objective() const override { return ObjectiveKind::kDdpm; }
  torch::nn::Module& module() override { return *this; }
  torch::Tensor Forward(const torch::Tensor& noisy, const torch::Tensor& timesteps,
                        const Conditioning& cond) override {
    return forward(noisy, timesteps, cond.text, {cond.pooled, cond.time_ids});
  }
  void SetGradientCheckpointing(bool on) override { set_gradient_checkpointing(on); }
  // Only "default": the attention projections (to_q, to_k, to_v, to_out.0).
  Status SetLoraTargets(const std::string& targets) override {
    if (targets == "default") return Status::Ok();
    return Status::Invalid("lora_targets \"" + targets + "\": a UNet has only \"default\"");
  }
  LoraAdapters LoraAdaptersFor(const TensorMap* file = nullptr) override;
  std::map<std::string, std::string> LoraFileMetadata() const override;

  // Shape of every parameter by state-dict key (also before LoadStateDict fills them).
  const std::map<std::string, std::vector<int64_t>>& parameter_shapes() const { return shapes_; }

 private:
  void Build(bool hollow);
  // Registers a child, records its parameter shapes and, when hollow, frees their storage.
  template <class M>
  std::shared_ptr<M> Add(torch::nn::ModuleList* list, const std::string& name, std::shared_ptr<M> m,
                         bool hollow);

  UNetConfig config_;
  BasePlacement placement_;
  Checkpointer ckpt_;
  std::map<std::string, std::vector<int64_t>> shapes_;
  torch::nn::Conv2d conv_in_{nullptr}, conv_out_{nullptr};
  std::shared_ptr<TimestepMlp> time_embedding_, add_embedding_;
  torch::nn::GroupNorm conv_norm_out_{nullptr};
  std::vector<std::shared_ptr<DownBlock>> down_;
  std::shared_ptr<MidBlock> mid_;
  std::vector<std::shared_ptr<UpBlock>> up_;
};

// Fills the model's parameters from `weights` (any float dtype, converted to the placement's
// dtype and moved to its device, tensor by tensor) and freezes them: nn/module_weights.h's
// LoadHollowModuleWeights. Where no conversion is needed the model shares storage with
// `weights`, so do not modify them in place afterwards. Missing, unexpected and mis-shaped keys
// are errors that name the keys.
Status LoadStateDict(UNet& model, const TensorMap& weights);
// Deterministic random weights for a config (default init from a fixed seed), keyed like
// diffusers' state dict: for tests, benchmarks and demos without a real checkpoint.
TensorMap RandomWeights(const UNetConfig& config, uint64_t seed);
// diffusers' get_timestep_embedding (its Timesteps module, max_period 10000, scale 1):
// t [N] -> [N, dim] fp32 sinusoids.
torch::Tensor SinusoidalEmbedding(const torch::Tensor& t, int64_t dim, bool flip_sin_to_cos,
                                  double freq_shift);

}  // namespace gleaner::train::unet
