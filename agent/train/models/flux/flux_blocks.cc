#include "agent/train/models/flux/flux_blocks.h"

#include <cmath>

#include "agent/train/nn/attention.h"

namespace gleaner::train::flux {

using torch::Tensor;
using torch::indexing::Slice;

Rope RopeTable(const Tensor& ids_in, const std::vector<int>& axes_dims, double theta) {
  Tensor ids = ids_in.dim() == 3 ? ids_in[0] : ids_in;
  TORCH_CHECK(ids.dim() == 2 && ids.size(1) == int64_t(axes_dims.size()), "ids must be [L, ",
              axes_dims.size(), "], got ", ids_in.sizes());
  auto f64 = torch::TensorOptions().dtype(torch::kFloat64).device(ids.device());
  std::vector<Tensor> cos, sin;
  for (size_t i = 0; i < axes_dims.size(); ++i) {
    const int64_t dim = axes_dims[i];
    // freqs_j = theta^(-2j/dim); angles [L, dim/2] in float64, as diffusers computes them.
    Tensor freqs = 1.0 / torch::pow(theta, torch::arange(0, dim, 2, f64) / double(dim));
    Tensor angles =
        torch::outer(ids.select(1, int64_t(i)).to(torch::kFloat32).to(torch::kFloat64), freqs);
    cos.push_back(angles.cos().repeat_interleave(2, 1).to(torch::kFloat32));
    sin.push_back(angles.sin().repeat_interleave(2, 1).to(torch::kFloat32));
  }
  return {torch::cat(cos, -1), torch::cat(sin, -1)};  // [L, head_dim] each
}

Tensor ApplyRope(const Tensor& x, const Rope& rope) {
  // x [B, L, H, d]: pairs (re, im) -> (-im, re), then x cos + rotated sin, in fp32.
  auto sizes = x.sizes().vec();
  Tensor pairs = x.reshape({sizes[0], sizes[1], sizes[2], sizes[3] / 2, 2});
  Tensor re = pairs.select(-1, 0), im = pairs.select(-1, 1);
  Tensor rotated = torch::stack({-im, re}, -1).flatten(3);
  Tensor cos = rope.cos.unsqueeze(0).unsqueeze(2), sin = rope.sin.unsqueeze(0).unsqueeze(2);
  return (x.to(torch::kFloat32) * cos + rotated.to(torch::kFloat32) * sin).to(x.scalar_type());
}

void RegisterPath(torch::nn::Module& root, const std::string& path,
                  std::shared_ptr<torch::nn::Module> m) {
  torch::nn::Module* at = &root;
  size_t start = 0;
  for (size_t dot = path.find('.'); dot != std::string::npos; dot = path.find('.', start)) {
    std::string name = path.substr(start, dot - start);
    std::shared_ptr<torch::nn::Module> next;
    for (const auto& child : at->named_children()) {
      if (child.key() == name) next = child.value();
    }
    if (!next) next = at->register_module(name, std::make_shared<torch::nn::Module>());
    at = next.get();
    start = dot + 1;
  }
  at->register_module(path.substr(start), std::move(m));
}

FluxRmsNormImpl::FluxRmsNormImpl(int64_t dim) {
  weight = register_parameter("weight", torch::ones({dim}));
}

Tensor FluxRmsNormImpl::forward(const Tensor& x) {
  Tensor f = x.to(torch::kFloat32);
  Tensor y = f * torch::rsqrt(f.pow(2).mean(-1, /*keepdim=*/true) + 1e-6);
  return (y * weight.to(torch::kFloat32)).to(x.scalar_type());
}

std::shared_ptr<LoraLinearImpl> StreamBlock::Linear(const std::string& path, int64_t in,
                                                    int64_t out) {
  auto l = std::make_shared<LoraLinearImpl>(in, out, /*bias=*/true);
  RegisterPath(*this, path, l);
  return l;
}

Tensor StreamBlock::Attend(Tensor q, Tensor k, Tensor v) {
  TORCH_CHECK(rope_ != nullptr, "FLUX block run without its rotary table");
  AttentionOptions o;
  o.heads = heads_;
  o.scale = 1.0 / std::sqrt(double(head_dim_));
  auto heads = [&](const Tensor& t) {
    return t.reshape({t.size(0), t.size(1), heads_, head_dim_});
  };
  Tensor qh = ApplyRope(heads(q), *rope_), kh = ApplyRope(heads(k), *rope_);
  return MultiHeadAttention(qh.flatten(2), kh.flatten(2), v, o);  // [B, L, H*d]
}

namespace {

Tensor LayerNorm(const Tensor& x) {
  return torch::layer_norm(x, {x.size(-1)}, {}, {}, 1e-6);
}
// x * (1 + scale) + shift, with scale and shift [B, D] broadcast over the tokens.
Tensor Modulate(const Tensor& x, const Tensor& shift, const Tensor& scale) {
  return x * (1 + scale.unsqueeze(1)) + shift.unsqueeze(1);
}

}  // namespace

DoubleBlock::DoubleBlock(int64_t dim, int64_t heads, int64_t head_dim) {
  heads_ = heads;
  head_dim_ = head_dim;
  const int64_t inner = heads * head_dim;
  norm1_ = Linear("norm1.linear", dim, 6 * dim);
  norm1_context_ = Linear("norm1_context.linear", dim, 6 * dim);
  to_q_ = Linear("attn.to_q", dim, inner);
  to_k_ = Linear("attn.to_k", dim, inner);
  to_v_ = Linear("attn.to_v", dim, inner);
  to_out_ = Linear("attn.to_out.0", inner, dim);
  add_q_ = Linear("attn.add_q_proj", dim, inner);
  add_k_ = Linear("attn.add_k_proj", dim, inner);
  add_v_ = Linear("attn.add_v_proj", dim, inner);
  to_add_out_ = Linear("attn.to_add_out", inner, dim);
  auto norm = [&](const char* path) {
    auto n = std::make_shared<FluxRmsNormImpl>(head_dim);
    RegisterPath(*this, path, n);
    return n;
  };
  norm_q_ = norm("attn.norm_q");
  norm_k_ = norm("attn.norm_k");
  norm_added_q_ = norm("attn.norm_added_q");
  norm_added_k_ = norm("attn.norm_added_k");
  ff0_ = Linear("ff.net.0.proj", dim, 4 * dim);
  ff2_ = Linear("ff.net.2", 4 * dim, dim);
  ffc0_ = Linear("ff_context.net.0.proj", dim, 4 * dim);
  ffc2_ = Linear("ff_context.net.2", 4 * dim, dim);
}

Tensor DoubleBlock::Run(const Tensor& x, const Tensor& temb) {
  const int64_t t = text_len_;
  Tensor txt = x.narrow(1, 0, t), img = x.narrow(1, t, x.size(1) - t);
  Tensor act = torch::silu(temb);
  // AdaLayerNormZero: shift, scale, gate (attention), shift, scale, gate (MLP) per stream.
  std::vector<Tensor> m = norm1_->forward(act).chunk(6, 1);
  std::vector<Tensor> c = norm1_context_->forward(act).chunk(6, 1);
  Tensor img_n = Modulate(LayerNorm(img), m[0], m[1]);
  Tensor txt_n = Modulate(LayerNorm(txt), c[0], c[1]);
  // Joint attention over [text; image], q/k RMS-normed per head and rotated.
  auto per_head = [&](FluxRmsNormImpl& n, const Tensor& y) {
    return n.forward(y.reshape({y.size(0), y.size(1), heads_, head_dim_})).flatten(2);
  };
  Tensor q = torch::cat(
      {per_head(*norm_added_q_, add_q_->forward(txt_n)), per_head(*norm_q_, to_q_->forward(img_n))},
      1);
  Tensor k = torch::cat(
      {per_head(*norm_added_k_, add_k_->forward(txt_n)), per_head(*norm_k_, to_k_->forward(img_n))},
      1);
  Tensor v = torch::cat({add_v_->forward(txt_n), to_v_->forward(img_n)}, 1);
  Tensor a = Attend(q, k, v);
  Tensor img_a = to_out_->forward(a.narrow(1, t, a.size(1) - t));
  Tensor txt_a = to_add_out_->forward(a.narrow(1, 0, t));
  // Gated residuals, then the GELU(tanh) feed-forwards.
  img = img + m[2].unsqueeze(1) * img_a;
  Tensor h = Modulate(LayerNorm(img), m[3], m[4]);
  img = img + m[5].unsqueeze(1) * ff2_->forward(torch::gelu(ff0_->forward(h), "tanh"));
  txt = txt + c[2].unsqueeze(1) * txt_a;
  h = Modulate(LayerNorm(txt), c[3], c[4]);
  txt = txt + c[5].unsqueeze(1) * ffc2_->forward(torch::gelu(ffc0_->forward(h), "tanh"));
  if (txt.scalar_type() == torch::kFloat16) txt = txt.clamp(-65504, 65504);
  return torch::cat({txt, img}, 1);
}

SingleBlock::SingleBlock(int64_t dim, int64_t heads, int64_t head_dim) {
  heads_ = heads;
  head_dim_ = head_dim;
  const int64_t inner = heads * head_dim;
  norm_ = Linear("norm.linear", dim, 3 * dim);
  proj_mlp_ = Linear("proj_mlp", dim, 4 * dim);
  proj_out_ = Linear("proj_out", dim + 4 * dim, dim);
  to_q_ = Linear("attn.to_q", dim, inner);
  to_k_ = Linear("attn.to_k", dim, inner);
  to_v_ = Linear("attn.to_v", dim, inner);
  norm_q_ = std::make_shared<FluxRmsNormImpl>(head_dim);
  RegisterPath(*this, "attn.norm_q", norm_q_);
  norm_k_ = std::make_shared<FluxRmsNormImpl>(head_dim);
  RegisterPath(*this, "attn.norm_k", norm_k_);
}

Tensor SingleBlock::Run(const Tensor& x, const Tensor& temb) {
  // AdaLayerNormZeroSingle: shift, scale, gate.
  std::vector<Tensor> m = norm_->forward(torch::silu(temb)).chunk(3, 1);
  Tensor h = Modulate(LayerNorm(x), m[0], m[1]);
  Tensor mlp = torch::gelu(proj_mlp_->forward(h), "tanh");
  auto per_head = [&](FluxRmsNormImpl& n, const Tensor& y) {
    return n.forward(y.reshape({y.size(0), y.size(1), heads_, head_dim_})).flatten(2);
  };
  Tensor a = Attend(per_head(*norm_q_, to_q_->forward(h)), per_head(*norm_k_, to_k_->forward(h)),
                    to_v_->forward(h));
  Tensor y = x + m[2].unsqueeze(1) * proj_out_->forward(torch::cat({a, mlp}, 2));
  if (y.scalar_type() == torch::kFloat16) y = y.clamp(-65504, 65504);
  return y;
}

}  // namespace gleaner::train::flux
