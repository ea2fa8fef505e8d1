// Multi-head scaled dot-product attention: the one place every model of the trainer (UNet, VAE
// mid block, CLIP text encoders) computes softmax(q k^T * scale) v.
//
// Contract: q [B, Lq, H*d], k and v [B, Lk, H*d] (projections already applied, heads packed in
// the last dimension); returns [B, Lq, H*d] in v's dtype. `upcast` computes scores and softmax in
// fp32 (diffusers' upcast_attention); `causal` masks key j > query i (CLIP's causal mask).
// The math is diffusers' AttnProcessor: baddbmm(scale) then softmax then bmm. Pure function.
#pragma once

#include <torch/torch.h>

#include <cstdint>

namespace gleaner::train {

struct AttentionOptions {
  int64_t heads = 1;
  double scale = 1.0;  // usually head_dim^-0.5
  bool upcast = false;
  bool causal = false;
};

torch::Tensor MultiHeadAttention(const torch::Tensor& q, const torch::Tensor& k,
                                 const torch::Tensor& v, const AttentionOptions& options);

}  // namespace gleaner::train
