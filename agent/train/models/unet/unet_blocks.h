// The blocks UNet2DConditionModel is made of (unet.h composes them), as diffusers 0.31 builds
// them for SD 1.x/2.x and SDXL, registered under diffusers' state-dict names.
//
// Shapes in comments: B batch, C channels, H x W spatial size, L = H*W tokens, T text tokens,
// D cross_attention_dim, E time embedding dim (4 * block_out_channels[0]).
//
// Contract: internal to models/unet. Every block is deterministic (dropout 0), so the ones marked
// Recomputable can be re-run in backward by a Checkpointer. Not thread-safe.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <vector>

#include "agent/train/models/unet/unet_config.h"
#include "agent/train/nn/checkpoint.h"
#include "agent/train/nn/lora_linear.h"

namespace gleaner::train::unet {

// Multi-head attention with LoRA-capable to_q, to_k, to_v, to_out.0 (diffusers' Attention).
// x [B,L,C], context [B,T,D] (undefined: self-attention, context = x) -> [B,L,C].
class Attention : public torch::nn::Module {
 public:
  Attention(int64_t query_dim, int64_t context_dim, int64_t heads, int64_t head_dim, bool upcast);
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& context);

 private:
  std::shared_ptr<LoraLinearImpl> to_q_, to_k_, to_v_, to_out_;
  int64_t heads_;
  double scale_;
  bool upcast_;
};

// GEGLU feed-forward, "ff.net.0.proj" [C -> 8C] and "ff.net.2" [4C -> C]: [B,L,C] -> [B,L,C].
class FeedForward : public torch::nn::Module {
 public:
  explicit FeedForward(int64_t dim);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  torch::nn::Linear proj_{nullptr}, out_{nullptr};
};

// diffusers' BasicTransformerBlock: self-attention, cross-attention, feed-forward, each pre-norm
// and residual. h [B,L,C], context [B,T,D] -> [B,L,C]. The unit of gradient checkpointing
// inside attentions (as diffusers checkpoints it).
class TransformerBlock : public torch::nn::Module, public Recomputable {
 public:
  TransformerBlock(int64_t dim, int64_t heads, int64_t context_dim, bool upcast);
  torch::Tensor Run(const torch::Tensor& h, const torch::Tensor& context) override;

 private:
  torch::nn::LayerNorm norm1_{nullptr}, norm2_{nullptr}, norm3_{nullptr};
  std::shared_ptr<Attention> attn1_, attn2_;
  std::shared_ptr<FeedForward> ff_;
};

// diffusers' Transformer2DModel: GroupNorm, proj_in (1x1 conv or linear), `layers` transformer
// blocks over the L = H*W tokens, proj_out, plus the input. x [B,C,H,W] -> [B,C,H,W].
class Transformer2D : public torch::nn::Module {
 public:
  Transformer2D(const UNetConfig& c, int64_t channels, int64_t heads, int64_t layers);
  torch::Tensor forward(Checkpointer& ckpt, const torch::Tensor& x, const torch::Tensor& context);

 private:
  bool linear_;
  torch::nn::GroupNorm norm_{nullptr};
  torch::nn::Conv2d conv_in_{nullptr}, conv_out_{nullptr};  // use_linear_projection false
  torch::nn::Linear lin_in_{nullptr}, lin_out_{nullptr};    // use_linear_projection true
  std::vector<std::shared_ptr<TransformerBlock>> blocks_;
};

// diffusers' ResnetBlock2D: x [B,Cin,H,W], temb [B,E] -> [B,Cout,H,W]
// (GroupNorm-SiLU-conv, + time projection, GroupNorm-SiLU-conv, + shortcut) / out_scale.
class Resnet : public torch::nn::Module, public Recomputable {
 public:
  Resnet(const UNetConfig& c, int64_t in, int64_t out, double out_scale = 1.0);
  torch::Tensor Run(const torch::Tensor& x, const torch::Tensor& temb) override;

 private:
  double out_scale_;
  torch::nn::GroupNorm norm1_{nullptr}, norm2_{nullptr};
  torch::nn::Conv2d conv1_{nullptr}, conv2_{nullptr}, conv_shortcut_{nullptr};
  torch::nn::Linear time_emb_proj_{nullptr};
};

// What flows through the blocks besides the hidden states.
struct BlockInputs {
  torch::Tensor temb;     // [B,E]
  torch::Tensor context;  // [B,T,D]
  Checkpointer* ckpt;
};

// What down and up blocks share: layers of a resnet, each followed by a transformer when the
// block has attention, registered as "resnets" and "attentions".
class LayerStack : public torch::nn::Module {
 protected:
  // Adds layer j: Resnet(in -> out) and, with attention, Transformer2D(out, heads, layers).
  void AddLayer(const UNetConfig& c, int64_t in, int64_t out, bool attn, int64_t heads,
                int64_t transformer_layers);
  void RegisterLayers();
  // Layer j: [B,Cin,H,W] -> [B,Cout,H,W].
  torch::Tensor RunLayer(size_t j, const torch::Tensor& h, const BlockInputs& in);
  size_t num_layers() const { return resnets_.size(); }

 private:
  std::vector<std::shared_ptr<Resnet>> resnets_;
  std::vector<std::shared_ptr<Transformer2D>> attentions_;
};

// CrossAttnDownBlock2D / DownBlock2D (block i): per layer a resnet (and a transformer), each
// output kept as a skip; then a stride-2 conv unless last. [B,Cin,H,W] -> [B,Cout,H/2,W/2].
class DownBlock : public LayerStack {
 public:
  DownBlock(const UNetConfig& c, size_t i, int64_t in, int64_t out);
  torch::Tensor forward(torch::Tensor h, const BlockInputs& in, std::vector<torch::Tensor>* skips);

 private:
  torch::nn::Conv2d down_{nullptr};
  int pad_ = 1;
};

// UNetMidBlock2DCrossAttn: resnet, transformer, resnet. [B,C,h,w] -> [B,C,h,w].
class MidBlock : public torch::nn::Module {
 public:
  explicit MidBlock(const UNetConfig& c);
  torch::Tensor forward(torch::Tensor h, const BlockInputs& in);

 private:
  std::shared_ptr<Resnet> resnet0_, resnet1_;
  std::shared_ptr<Transformer2D> attention_;
};

// CrossAttnUpBlock2D / UpBlock2D (up block i, mirroring down block n-1-i): per layer concat the
// newest skip, resnet (and transformer); then nearest 2x upsampling + conv unless last.
// [B,Cprev,h,w] -> [B,Cout,2h,2w] (or the next skip's size).
class UpBlock : public LayerStack {
 public:
  UpBlock(const UNetConfig& c, size_t i, int64_t prev_out);
  torch::Tensor forward(torch::Tensor h, const BlockInputs& in, std::vector<torch::Tensor>* skips);

 private:
  torch::nn::Conv2d up_{nullptr};
};

}  // namespace gleaner::train::unet
