// FluxTransformer2DModel (FLUX.1 dev and schnell) in libtorch: x/context embedders, timestep +
// guidance + pooled-text embedding, 3-axis RoPE over text and image ids, double-stream blocks,
// single-stream blocks, AdaLN-continuous output (flux_blocks.h).
//
// Contract: parameter names are exactly diffusers' state-dict keys, so a diffusers
// `transformer/` safetensors file loads as is (the original single-file layout is converted by
// flux_single_file.h). The base weights are frozen and live where a BasePlacement says
// (nn/placement.h: device, dtype, fp8 Linear weights upcast per layer); only LoRA tensors
// (every Linear inside the blocks is a LoraLinear) train. Forward matches diffusers 0.40
// (FluxAttnProcessor; attention through nn/attention.h's kernels). Per-block gradient
// checkpointing (nn/checkpoint.h). Not thread-safe.
#pragma once

#include <torch/torch.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "agent/train/models/flux/flux_blocks.h"
#include "agent/train/models/flux/flux_config.h"
#include "agent/train/nn/checkpoint.h"
#include "agent/train/nn/lora_linear.h"
#include "agent/train/nn/placement.h"
#include "agent/train/nn/torch_io.h"

namespace gleaner::train::flux {

class FluxTransformer : public torch::nn::Module {
 public:
  // Default-initialised fp32 CPU weights (RandomFluxWeights and tests).
  explicit FluxTransformer(const FluxConfig& config);
  // Parameters without storage, to be filled by LoadFluxStateDict on `placement`; at most one
  // block's default init exists at a time while building.
  FluxTransformer(const FluxConfig& config, const BasePlacement& placement);

  // hidden_states [B,S,in_channels] (packed latent tokens), encoder_hidden_states [B,T,joint],
  // pooled [B,pooled_projection_dim], timestep [B] (sigma-like in [0,1]; x1000 inside),
  // img_ids [S,3], txt_ids [T,3], guidance [B] (x1000 inside; required exactly when the config
  // has guidance_embeds, else undefined) -> [B,S,out_channels].
  torch::Tensor forward(const torch::Tensor& hidden_states,
                        const torch::Tensor& encoder_hidden_states, const torch::Tensor& pooled,
                        const torch::Tensor& timestep, const torch::Tensor& img_ids,
                        const torch::Tensor& txt_ids, const torch::Tensor& guidance = {});

  void set_gradient_checkpointing(bool on) { ckpt_.set_enabled(on); }
  // Every LoraLinear of the blocks, by module path, in module order.
  std::vector<std::pair<std::string, LoraLinearImpl*>> BlockLinears();
  const FluxConfig& config() const { return config_; }
  const BasePlacement& placement() const { return placement_; }
  // Shape of every parameter by state-dict key (also before LoadFluxStateDict fills them).
  const std::map<std::string, std::vector<int64_t>>& parameter_shapes() const { return shapes_; }

 private:
  void Build(bool hollow);
  template <class M>
  std::shared_ptr<M> Add(const std::string& path, std::shared_ptr<M> m, bool hollow);

  FluxConfig config_;
  BasePlacement placement_;
  Checkpointer ckpt_;
  std::map<std::string, std::vector<int64_t>> shapes_;
  torch::nn::Linear x_embedder_{nullptr}, context_embedder_{nullptr}, proj_out_{nullptr},
      norm_out_{nullptr};
  torch::nn::Linear time_1_{nullptr}, time_2_{nullptr}, guidance_1_{nullptr}, guidance_2_{nullptr},
      text_1_{nullptr}, text_2_{nullptr};
  std::vector<std::shared_ptr<DoubleBlock>> double_;
  std::vector<std::shared_ptr<SingleBlock>> single_;
  Rope rope_;  // of the last forward (the blocks' recomputation reads it)
};

// Fills the model's parameters from diffusers-named `weights` (any float dtype; converted to the
// placement's dtype and device tensor by tensor; Linear weights to fp8 when placement.fp8_linear)
// and freezes them. Missing, unexpected and mis-shaped keys are errors naming the keys.
Status LoadFluxStateDict(FluxTransformer& model, const TensorMap& weights);
// Deterministic random weights for a config (default init from a fixed seed), diffusers names.
TensorMap RandomFluxWeights(const FluxConfig& config, uint64_t seed);

}  // namespace gleaner::train::flux
