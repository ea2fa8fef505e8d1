// Multi-head scaled dot-product attention: the one place every model of the trainer (UNet, VAE
// mid block, CLIP text encoders) computes softmax(q k^T * scale) v.
//
// Contract: q [B, Lq, H*d], k and v [B, Lk, H*d] (projections already applied, heads packed in
// the last dimension); returns [B, Lq, H*d] in v's dtype. `upcast` computes scores and softmax in
// fp32 even under autocast (diffusers' upcast_attention); `causal` masks key j > query i (CLIP's
// causal mask); `bias`, when defined, is added to the scaled scores before the softmax (T5's
// relative position bias: softmax(q k^T * scale + bias) v), broadcastable to [B, H, Lq, Lk] and
// not combined with `causal`. Pure function; libtorch errors surface as c10::Error (callers run
// under CatchTorch).
//
// Two kernels compute the same math:
//   explicit  diffusers' AttnProcessor: baddbmm(scale), softmax, bmm. Holds the B*H*Lq*Lk
//             probabilities; the only kernel with libtorch 1.13.
//   fused     at::scaled_dot_product_attention (libtorch 2.1+; diffusers' AttnProcessor2_0): on
//             CUDA the flash or memory-efficient kernel, which never materialises the scores.
// kAuto picks fused where this libtorch has it, unless the environment has
// GLEANER_ATTENTION=explicit (read once per process), which forces the explicit kernel everywhere
// so the two can be compared on the same build.
#pragma once

#include <torch/torch.h>

#include <cstdint>

namespace gleaner::train {

enum class AttentionKernel { kAuto, kExplicit, kFused };

struct AttentionOptions {
  int64_t heads = 1;
  double scale = 1.0;  // usually head_dim^-0.5
  bool upcast = false;
  bool causal = false;
  AttentionKernel kernel = AttentionKernel::kAuto;  // kFused without one: c10::Error
  torch::Tensor bias = {};                          // additive, [B|1, H|1, Lq, Lk]; optional
};

torch::Tensor MultiHeadAttention(const torch::Tensor& q, const torch::Tensor& k,
                                 const torch::Tensor& v, const AttentionOptions& options);

// The kernel kAuto stands for, given GLEANER_ATTENTION's value (null = unset): kExplicit for
// "explicit" or where libtorch has no fused kernel, else kFused.
AttentionKernel ResolveAttentionKernel(const char* env_value);
// "fused" or "explicit": what kAuto runs in this process (for logs and benchmark reports).
const char* AutoAttentionKernelName();

}  // namespace gleaner::train
