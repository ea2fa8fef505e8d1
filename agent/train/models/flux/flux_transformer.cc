#include "agent/train/models/flux/flux_transformer.h"

#include <cmath>

#include "agent/train/nn/module_weights.h"

namespace gleaner::train::flux {

namespace nn = torch::nn;
using torch::Tensor;

namespace {

// diffusers' Timesteps(256, flip_sin_to_cos=True, downscale_freq_shift=0): t [B] -> [B, 256] fp32.
Tensor TimeProjection(const Tensor& t) {
  const int64_t half = 128;
  auto f32 = torch::TensorOptions().dtype(torch::kFloat32).device(t.device());
  Tensor exponent = torch::arange(0, half, f32) * float(-std::log(10000.0)) / float(half);
  Tensor emb = t.to(torch::kFloat32).unsqueeze(1) * torch::exp(exponent).unsqueeze(0);
  return torch::cat({torch::cos(emb), torch::sin(emb)}, -1);
}

Tensor Mlp(const nn::Linear& l1, const nn::Linear& l2, const Tensor& x) {
  return BaseLinear(l2, torch::silu(BaseLinear(l1, x)));
}

// A timestep of shape [B], [1] or [] as [B].
Tensor PerSample(const Tensor& t, int64_t b, const char* name) {
  Tensor r = t.reshape({-1});
  if (r.size(0) == 1 && b != 1) r = r.expand({b});
  TORCH_CHECK(r.size(0) == b, name, " must have one value per sample (", b, "), got ", t.sizes());
  return r;
}

}  // namespace

FluxTransformer::FluxTransformer(const FluxConfig& config) : config_(config) {
  Build(/*hollow=*/false);
}

FluxTransformer::FluxTransformer(const FluxConfig& config, const BasePlacement& placement)
    : config_(config), placement_(placement) {
  Build(/*hollow=*/true);
}

template <class M>
std::shared_ptr<M> FluxTransformer::Add(const std::string& path, std::shared_ptr<M> m,
                                        bool hollow) {
  auto empty = torch::TensorOptions().dtype(placement_.dtype).device(placement_.device);
  for (const auto& p : m->named_parameters(/*recurse=*/true)) {
    shapes_[path + "." + p.key()] = p.value().sizes().vec();
    if (hollow) {
      p.value().set_requires_grad(false);
      p.value().set_data(torch::empty({0}, empty));
    }
  }
  RegisterPath(*this, path, m);
  return m;
}

// The module tree in diffusers' order.
void FluxTransformer::Build(bool hollow) {
  const FluxConfig& c = config_;
  const int64_t d = c.inner_dim();
  auto linear = [&](const std::string& path, int64_t in, int64_t out) {
    return nn::Linear(Add(path, nn::Linear(in, out).ptr(), hollow));
  };
  x_embedder_ = linear("x_embedder", c.in_channels, d);
  time_1_ = linear("time_text_embed.timestep_embedder.linear_1", 256, d);
  time_2_ = linear("time_text_embed.timestep_embedder.linear_2", d, d);
  if (c.guidance_embeds) {
    guidance_1_ = linear("time_text_embed.guidance_embedder.linear_1", 256, d);
    guidance_2_ = linear("time_text_embed.guidance_embedder.linear_2", d, d);
  }
  text_1_ = linear("time_text_embed.text_embedder.linear_1", c.pooled_projection_dim, d);
  text_2_ = linear("time_text_embed.text_embedder.linear_2", d, d);
  context_embedder_ = linear("context_embedder", c.joint_attention_dim, d);
  for (int i = 0; i < c.num_layers; ++i) {
    double_.push_back(
        Add("transformer_blocks." + std::to_string(i),
            std::make_shared<DoubleBlock>(d, c.num_attention_heads, c.attention_head_dim), hollow));
  }
  for (int i = 0; i < c.num_single_layers; ++i) {
    single_.push_back(
        Add("single_transformer_blocks." + std::to_string(i),
            std::make_shared<SingleBlock>(d, c.num_attention_heads, c.attention_head_dim), hollow));
  }
  norm_out_ = linear("norm_out.linear", d, 2 * d);
  proj_out_ = linear("proj_out", d, int64_t(c.patch_size) * c.patch_size * c.out_channels);
}

Tensor FluxTransformer::forward(const Tensor& hidden_states, const Tensor& encoder_hidden_states,
                                const Tensor& pooled, const Tensor& timestep, const Tensor& img_ids,
                                const Tensor& txt_ids, const Tensor& guidance) {
  const FluxConfig& c = config_;
  TORCH_CHECK(hidden_states.dim() == 3 && hidden_states.size(2) == c.in_channels,
              "hidden_states must be [B, S, ", c.in_channels, "], got ", hidden_states.sizes());
  const int64_t b = hidden_states.size(0), s = hidden_states.size(1);
  TORCH_CHECK(encoder_hidden_states.dim() == 3 && encoder_hidden_states.size(0) == b &&
                  encoder_hidden_states.size(2) == c.joint_attention_dim,
              "encoder_hidden_states must be [", b, ", T, ", c.joint_attention_dim, "], got ",
              encoder_hidden_states.sizes());
  const int64_t t = encoder_hidden_states.size(1);
  TORCH_CHECK(pooled.dim() == 2 && pooled.size(0) == b && pooled.size(1) == c.pooled_projection_dim,
              "pooled_projections must be [", b, ", ", c.pooled_projection_dim, "], got ",
              pooled.sizes());
  Tensor img_ids2 = img_ids.dim() == 3 ? img_ids[0] : img_ids;
  Tensor txt_ids2 = txt_ids.dim() == 3 ? txt_ids[0] : txt_ids;
  TORCH_CHECK(img_ids2.dim() == 2 && img_ids2.size(0) == s && img_ids2.size(1) == 3,
              "img_ids must be [", s, ", 3], got ", img_ids.sizes());
  TORCH_CHECK(txt_ids2.dim() == 2 && txt_ids2.size(0) == t && txt_ids2.size(1) == 3,
              "txt_ids must be [", t, ", 3], got ", txt_ids.sizes());
  TORCH_CHECK(guidance.defined() == c.guidance_embeds,
              c.guidance_embeds ? "this FLUX transformer (guidance_embeds) needs guidance"
                                : "guidance given, but the config has no guidance_embeds");

  Tensor h = BaseLinear(x_embedder_, hidden_states);  // [B,S,D]
  // temb = time MLP(sinusoids(1000 t)) (+ guidance MLP(sinusoids(1000 g))) + text MLP(pooled).
  Tensor ts = PerSample(timestep, b, "timestep").to(h.scalar_type()) * 1000;
  Tensor temb = Mlp(time_1_, time_2_, TimeProjection(ts).to(pooled.scalar_type()));
  if (c.guidance_embeds) {
    Tensor g = PerSample(guidance, b, "guidance").to(h.scalar_type()) * 1000;
    temb = temb + Mlp(guidance_1_, guidance_2_, TimeProjection(g).to(pooled.scalar_type()));
  }
  temb = temb + Mlp(text_1_, text_2_, pooled);                        // [B,D]
  Tensor ctx = BaseLinear(context_embedder_, encoder_hidden_states);  // [B,T,D]
  rope_ = RopeTable(torch::cat({txt_ids2, img_ids2}, 0).to(h.device()), c.axes_dims_rope);
  // The joint sequence [text; image] through the double-stream, then the single-stream blocks.
  Tensor x = torch::cat({ctx, h.to(ctx.scalar_type())}, 1);  // [B,T+S,D]
  for (auto& blk : double_) {
    blk->SetStream(&rope_, t);
    x = ckpt_.Run(blk.get(), x, temb);
  }
  for (auto& blk : single_) {
    blk->SetStream(&rope_, t);
    x = ckpt_.Run(blk.get(), x, temb);
  }
  Tensor img = x.narrow(1, t, s);
  // AdaLayerNormContinuous: (scale, shift) from silu(temb); LayerNorm without affine.
  std::vector<Tensor> ss = BaseLinear(norm_out_, torch::silu(temb)).chunk(2, 1);
  img = torch::layer_norm(img, {img.size(-1)}, {}, {}, 1e-6) * (1 + ss[0].unsqueeze(1)) +
        ss[1].unsqueeze(1);
  return BaseLinear(proj_out_, img);  // [B,S,out]
}

std::vector<std::pair<std::string, LoraLinearImpl*>> FluxTransformer::BlockLinears() {
  std::vector<std::pair<std::string, LoraLinearImpl*>> out;
  for (const auto& item : named_modules("", /*include_self=*/false)) {
    if (auto* l = dynamic_cast<LoraLinearImpl*>(item.value().get())) {
      out.emplace_back(item.key(), l);
    }
  }
  return out;
}

Status LoadFluxStateDict(FluxTransformer& model, const TensorMap& weights) {
  const BasePlacement& to = model.placement();
  HollowLayout layout{model.parameter_shapes(), to.device, to.dtype, {}};
  if (to.fp8_linear) {
    for (const auto& item : model.named_modules("", /*include_self=*/false)) {
      if (dynamic_cast<LoraLinearImpl*>(item.value().get()) != nullptr ||
          dynamic_cast<nn::LinearImpl*>(item.value().get()) != nullptr) {
        layout.fp8_keys.insert(item.key() + ".weight");
      }
    }
  }
  return LoadHollowModuleWeights(model, layout, weights, "weights");
}

TensorMap RandomFluxWeights(const FluxConfig& config, uint64_t seed) {
  torch::manual_seed(seed);
  FluxTransformer model(config);
  TensorMap out;
  for (const auto& p : model.named_parameters(true)) out[p.key()] = p.value().detach();
  return out;
}

}  // namespace gleaner::train::flux
