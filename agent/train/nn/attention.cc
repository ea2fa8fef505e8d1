#include "agent/train/nn/attention.h"

#include <limits>

namespace gleaner::train {

using torch::Tensor;

namespace {

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

}  // namespace

Tensor MultiHeadAttention(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in,
                          const AttentionOptions& o) {
  Tensor q = HeadsToBatch(q_in, o.heads);  // [B*H, Lq, d]
  Tensor k = HeadsToBatch(k_in, o.heads);  // [B*H, Lk, d]
  Tensor v = HeadsToBatch(v_in, o.heads);  // [B*H, Lk, d]
  if (o.upcast) {
    q = q.to(torch::kFloat32);
    k = k.to(torch::kFloat32);
  }
  // scores [B*H, Lq, Lk] = scale * q k^T
  Tensor scores = torch::baddbmm(torch::empty({q.size(0), q.size(1), k.size(1)}, q.options()), q,
                                 k.transpose(1, 2), /*beta=*/0, /*alpha=*/o.scale);
  if (o.causal) {
    Tensor mask = torch::ones({q.size(1), k.size(1)}, torch::TensorOptions().dtype(torch::kBool))
                      .triu(1)
                      .to(scores.device());
    scores = scores.masked_fill(mask, -std::numeric_limits<float>::infinity());
  }
  Tensor probs = scores.softmax(-1).to(v.scalar_type());
  return BatchToHeads(torch::bmm(probs, v), o.heads);  // [B, Lq, H*d]
}

}  // namespace gleaner::train
