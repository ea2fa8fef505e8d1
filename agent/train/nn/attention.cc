#include "agent/train/nn/attention.h"

#include <c10/core/impl/LocalDispatchKeySet.h>

#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>

#include "agent/train/nn/torch_compat.h"

namespace gleaner::train {

using torch::Tensor;

namespace {

// Autocast off for the lifetime of the guard (upcast: the scores stay fp32 under autocast).
using NoAutocast = c10::impl::ExcludeDispatchKeyGuard;

// [B, L, H*d] -> [B*H, L, d]
Tensor HeadsToBatch(const Tensor& t, int64_t heads) {
  int64_t b = t.size(0), s = t.size(1), d = t.size(2) / heads;
  return t.reshape({b, s, heads, d}).permute({0, 2, 1, 3}).reshape({b * heads, s, d});
}
// [B*H, L, d] -> [B, L, H*d]
Tensor BatchToHeads(const Tensor& t, int64_t heads) {
  int64_t b = t.size(0) / heads, s = t.size(1), d = t.size(2);
  return t.reshape({b, heads, s, d}).permute({0, 2, 1, 3}).reshape({b, s, heads * d});
}

Tensor ExplicitAttention(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in,
                         const AttentionOptions& o) {
  Tensor q = HeadsToBatch(q_in, o.heads);  // [B*H, Lq, d]
  Tensor k = HeadsToBatch(k_in, o.heads);  // [B*H, Lk, d]
  Tensor v = HeadsToBatch(v_in, o.heads);  // [B*H, Lk, d]
  Tensor probs;                            // [B*H, Lq, Lk]
  {
    std::optional<NoAutocast> no_autocast;
    if (o.upcast) {
      no_autocast.emplace(c10::autocast_dispatch_keyset);
      q = q.to(torch::kFloat32);
      k = k.to(torch::kFloat32);
    }
    // scores = scale * q k^T, as 0 + scale * q k^T: libtorch before 2.0 reads the output of a
    // small CPU baddbmm even with beta = 0 (0 * NaN of uninitialised memory is NaN), so the
    // input is zeros and beta 1, which is the same sum everywhere. An additive bias takes the
    // zeros' place.
    const int64_t lq = q.size(1), lk = k.size(1);
    Tensor input = o.bias.defined() ? o.bias.to(q.scalar_type())
                                          .expand({q_in.size(0), o.heads, lq, lk})
                                          .reshape({q.size(0), lq, lk})
                                    : torch::zeros({q.size(0), lq, lk}, q.options());
    Tensor scores = torch::baddbmm(input, q, k.transpose(1, 2), /*beta=*/1, /*alpha=*/o.scale);
    if (o.causal) {
      Tensor mask = torch::ones({q.size(1), k.size(1)}, torch::TensorOptions().dtype(torch::kBool))
                        .triu(1)
                        .to(scores.device());
      scores = scores.masked_fill(mask, -std::numeric_limits<float>::infinity());
    }
    probs = scores.softmax(-1).to(v.scalar_type());
  }
  return BatchToHeads(torch::bmm(probs, v), o.heads);  // [B, Lq, H*d]
}

#if GLEANER_TORCH_AT_LEAST(2, 1)
Tensor FusedMultiHead(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in,
                      const AttentionOptions& o) {
  // [B, L, H*d] -> [B, H, L, d] (a view: the kernels take strided heads)
  auto split = [&](const Tensor& t) {
    return t.reshape({t.size(0), t.size(1), o.heads, t.size(2) / o.heads}).transpose(1, 2);
  };
  Tensor q = split(q_in), k = split(k_in), v = split(v_in);
  c10::ScalarType out_dtype = v_in.scalar_type();
  std::optional<NoAutocast> no_autocast;
  if (o.upcast) {
    // Autocast would cast fp32 inputs back down; the fp32 kernel is the memory-efficient one.
    no_autocast.emplace(c10::autocast_dispatch_keyset);
    q = q.to(torch::kFloat32);
    k = k.to(torch::kFloat32);
    v = v.to(torch::kFloat32);
  }
  // An additive bias goes in as SDPA's float attn_mask (the memory-efficient kernel takes it).
  Tensor y = o.bias.defined()
                 ? at::scaled_dot_product_attention(q, k, v, o.bias.to(q.scalar_type()),
                                                    /*dropout_p=*/0.0, /*is_causal=*/false, o.scale)
                 : FusedAttention(q, k, v, o.scale, o.causal);  // [B, H, Lq, d]
  return y.transpose(1, 2).reshape({q_in.size(0), q_in.size(1), v_in.size(2)}).to(out_dtype);
}
#endif

AttentionKernel AutoKernel() {
  static const AttentionKernel kernel = ResolveAttentionKernel(std::getenv("GLEANER_ATTENTION"));
  return kernel;
}

}  // namespace

AttentionKernel ResolveAttentionKernel(const char* env_value) {
  if (!kHasFusedAttention) return AttentionKernel::kExplicit;
  if (env_value != nullptr && std::strcmp(env_value, "explicit") == 0) {
    return AttentionKernel::kExplicit;
  }
  return AttentionKernel::kFused;
}

const char* AutoAttentionKernelName() {
  return AutoKernel() == AttentionKernel::kFused ? "fused" : "explicit";
}

Tensor MultiHeadAttention(const Tensor& q, const Tensor& k, const Tensor& v,
                          const AttentionOptions& o) {
  TORCH_CHECK(!(o.causal && o.bias.defined()), "attention: bias and causal are exclusive");
  AttentionKernel kernel = o.kernel == AttentionKernel::kAuto ? AutoKernel() : o.kernel;
  if (kernel == AttentionKernel::kExplicit) return ExplicitAttention(q, k, v, o);
#if GLEANER_TORCH_AT_LEAST(2, 1)
  return FusedMultiHead(q, k, v, o);
#else
  TORCH_CHECK(false, "fused attention needs libtorch 2.1 or newer (this is ", TORCH_VERSION, ")");
  return Tensor();
#endif
}

}  // namespace gleaner::train
