// The building blocks of the FLUX.1 transformer (flux_transformer.h), with diffusers'
// module names: the 3-axis rotary embedding, the double-stream block (FluxTransformerBlock) and
// the single-stream block (FluxSingleTransformerBlock).
//
// Both blocks are Recomputable (nn/checkpoint.h): Run(x, temb) takes the joint sequence
// x = cat(text tokens, image tokens) [B, T+S, D] and the conditioning embedding temb [B, D], and
// returns the joint sequence after the block. The rotary table and the text length are set on the
// block (SetStream) before each forward; they must stay unchanged until its backward has run (the
// transformer sets them once per forward).
//
// Contract: every Linear inside a block is a LoraLinear (LoRA-capable; any of them can be a
// target). Parameter names are diffusers' state-dict keys. Not thread-safe.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "agent/train/nn/checkpoint.h"
#include "agent/train/nn/lora_linear.h"

namespace gleaner::train::flux {

// The RoPE table of a token sequence: cos and sin [L, head_dim] (fp32), each frequency repeated
// for its (real, imaginary) pair, as diffusers' FluxPosEmbed (theta 10000, use_real).
struct Rope {
  torch::Tensor cos, sin;
};
// ids [L, 3] (float positions per axis; [1, L, 3] is accepted as diffusers does) -> the table.
Rope RopeTable(const torch::Tensor& ids, const std::vector<int>& axes_dims, double theta = 10000);
// x [B, L, H, d] rotated by the table (pairs interleaved on the last dimension).
torch::Tensor ApplyRope(const torch::Tensor& x, const Rope& rope);

// Registers `m` under a dotted path ("attn.to_out.0") below `root`, creating plain modules for
// the intermediate names.
void RegisterPath(torch::nn::Module& root, const std::string& path,
                  std::shared_ptr<torch::nn::Module> m);

// A learnable-scale RMS norm over the last dimension (eps 1e-6), diffusers' RMSNorm: "weight".
struct FluxRmsNormImpl : torch::nn::Module {
  explicit FluxRmsNormImpl(int64_t dim);
  torch::Tensor forward(const torch::Tensor& x);
  torch::Tensor weight;
};

// What both block kinds share: the stream set before each forward.
class StreamBlock : public torch::nn::Module, public Recomputable {
 public:
  void SetStream(const Rope* rope, int64_t text_len) {
    rope_ = rope;
    text_len_ = text_len;
  }

 protected:
  std::shared_ptr<LoraLinearImpl> Linear(const std::string& path, int64_t in, int64_t out);
  // Multi-head attention of q/k/v [B, L, H*d] after the per-head RMS norms and RoPE.
  torch::Tensor Attend(torch::Tensor q, torch::Tensor k, torch::Tensor v);
  int64_t heads_ = 1, head_dim_ = 1;
  const Rope* rope_ = nullptr;
  int64_t text_len_ = 0;
};

class DoubleBlock : public StreamBlock {
 public:
  DoubleBlock(int64_t dim, int64_t heads, int64_t head_dim);
  torch::Tensor Run(const torch::Tensor& x, const torch::Tensor& temb) override;

 private:
  std::shared_ptr<LoraLinearImpl> norm1_, norm1_context_, to_q_, to_k_, to_v_, to_out_, add_q_,
      add_k_, add_v_, to_add_out_, ff0_, ff2_, ffc0_, ffc2_;
  std::shared_ptr<FluxRmsNormImpl> norm_q_, norm_k_, norm_added_q_, norm_added_k_;
};

class SingleBlock : public StreamBlock {
 public:
  SingleBlock(int64_t dim, int64_t heads, int64_t head_dim);
  torch::Tensor Run(const torch::Tensor& x, const torch::Tensor& temb) override;

 private:
  std::shared_ptr<LoraLinearImpl> norm_, to_q_, to_k_, to_v_, proj_mlp_, proj_out_;
  std::shared_ptr<FluxRmsNormImpl> norm_q_, norm_k_;
};

}  // namespace gleaner::train::flux
