#include "agent/train/lora_sd/unet.h"

#include <ATen/autocast_mode.h>

#include <cmath>
#include <set>

#include "agent/train/nn/attention.h"

namespace gleaner::train::lora_sd {

namespace nn = torch::nn;
using torch::Tensor;

namespace {

nn::Conv2d Conv(int64_t in, int64_t out, int64_t k, int64_t stride = 1, int64_t pad = 0) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, k).stride(stride).padding(pad));
}
nn::GroupNorm GN(int64_t groups, int64_t ch, double eps) {
  return nn::GroupNorm(nn::GroupNormOptions(groups, ch).eps(eps));
}
nn::LayerNorm LN(int64_t dim) {
  return nn::LayerNorm(nn::LayerNormOptions({dim}).eps(1e-5).elementwise_affine(true));
}

}  // namespace

class Attention : public nn::Module {
 public:
  Attention(int64_t query_dim, int64_t context_dim, int64_t heads, int64_t head_dim, bool upcast)
      : heads_(heads), scale_(1.0 / std::sqrt(double(head_dim))), upcast_(upcast) {
    int64_t inner = heads * head_dim;
    to_q = register_module("to_q", std::make_shared<LoraLinearImpl>(query_dim, inner, false));
    to_k = register_module("to_k", std::make_shared<LoraLinearImpl>(context_dim, inner, false));
    to_v = register_module("to_v", std::make_shared<LoraLinearImpl>(context_dim, inner, false));
    to_out0 = std::make_shared<LoraLinearImpl>(inner, query_dim, true);
    nn::ModuleList to_out;
    to_out->push_back(to_out0);
    register_module("to_out", to_out);
  }
  // context undefined = self-attention.
  Tensor forward(const Tensor& x, const Tensor& context) {
    const Tensor& ctx = context.defined() ? context : x;
    Tensor q = to_q->forward(x);    // [B, Lq, H*d]
    Tensor k = to_k->forward(ctx);  // [B, Lk, H*d]
    Tensor v = to_v->forward(ctx);
    AttentionOptions o;
    o.heads = heads_;
    o.scale = scale_;
    o.upcast = upcast_;
    return to_out0->forward(MultiHeadAttention(q, k, v, o));
  }
  std::shared_ptr<LoraLinearImpl> to_q, to_k, to_v, to_out0;

 private:
  int64_t heads_;
  double scale_;
  bool upcast_;
};

class Geglu : public nn::Module {
 public:
  Geglu(int64_t in, int64_t out) { proj = register_module("proj", nn::Linear(in, out * 2)); }
  Tensor forward(const Tensor& x) {
    std::vector<Tensor> parts = proj->forward(x).chunk(2, -1);
    return parts[0] * torch::gelu(parts[1]);
  }
  nn::Linear proj{nullptr};
};

class TransformerBlock : public nn::Module {
 public:
  TransformerBlock(int64_t dim, int64_t heads, int64_t head_dim, int64_t context_dim, bool upcast) {
    norm1 = register_module("norm1", LN(dim));
    attn1 =
        register_module("attn1", std::make_shared<Attention>(dim, dim, heads, head_dim, upcast));
    norm2 = register_module("norm2", LN(dim));
    attn2 = register_module("attn2",
                            std::make_shared<Attention>(dim, context_dim, heads, head_dim, upcast));
    norm3 = register_module("norm3", LN(dim));
    geglu = std::make_shared<Geglu>(dim, dim * 4);
    out = nn::Linear(dim * 4, dim);
    nn::ModuleList net;
    net->push_back(geglu);
    net->push_back(nn::Dropout(0.0));
    net->push_back(out);
    register_module("ff", std::make_shared<FeedForwardHolder>(net));
  }
  Tensor forward(Tensor h, const Tensor& context) {
    h = attn1->forward(norm1->forward(h), Tensor()) + h;
    h = attn2->forward(norm2->forward(h), context) + h;
    return out->forward(geglu->forward(norm3->forward(h))) + h;
  }

 private:
  struct FeedForwardHolder : nn::Module {
    explicit FeedForwardHolder(nn::ModuleList net) { register_module("net", net); }
  };
  nn::LayerNorm norm1{nullptr}, norm2{nullptr}, norm3{nullptr};
  std::shared_ptr<Attention> attn1, attn2;
  std::shared_ptr<Geglu> geglu;
  nn::Linear out{nullptr};
};

class Transformer2D : public nn::Module, public Recomputable {
 public:
  Transformer2D(const UNetConfig& c, int64_t channels, int64_t heads, int64_t layers)
      : linear_(c.use_linear_projection) {
    norm = register_module("norm", GN(c.norm_num_groups, channels, 1e-6));
    if (linear_) {
      lin_in = register_module("proj_in", nn::Linear(channels, channels));
    } else {
      conv_in = register_module("proj_in", Conv(channels, channels, 1));
    }
    nn::ModuleList list;
    for (int64_t i = 0; i < layers; ++i) {
      blocks.push_back(std::make_shared<TransformerBlock>(
          channels, heads, channels / heads, c.cross_attention_dim, c.upcast_attention));
      list->push_back(blocks.back());
    }
    register_module("transformer_blocks", list);
    if (linear_) {
      lin_out = register_module("proj_out", nn::Linear(channels, channels));
    } else {
      conv_out = register_module("proj_out", Conv(channels, channels, 1));
    }
  }
  Tensor Run(const Tensor& x, const Tensor& context) override {
    int64_t b = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
    Tensor t = norm->forward(x);
    if (linear_) {
      t = lin_in->forward(t.permute({0, 2, 3, 1}).reshape({b, h * w, c}));
    } else {
      t = conv_in->forward(t).permute({0, 2, 3, 1}).reshape({b, h * w, c});
    }
    for (auto& blk : blocks) t = blk->forward(t, context);
    if (linear_) {
      t = lin_out->forward(t).reshape({b, h, w, c}).permute({0, 3, 1, 2}).contiguous();
    } else {
      t = conv_out->forward(t.reshape({b, h, w, c}).permute({0, 3, 1, 2}).contiguous());
    }
    return t + x;
  }

 private:
  bool linear_;
  nn::GroupNorm norm{nullptr};
  nn::Conv2d conv_in{nullptr}, conv_out{nullptr};
  nn::Linear lin_in{nullptr}, lin_out{nullptr};
  std::vector<std::shared_ptr<TransformerBlock>> blocks;
};

class Resnet : public nn::Module, public Recomputable {
 public:
  Resnet(const UNetConfig& c, int64_t in, int64_t out, int64_t temb, double out_scale = 1.0)
      : out_scale_(out_scale) {
    norm1 = register_module("norm1", GN(c.norm_num_groups, in, c.norm_eps));
    conv1 = register_module("conv1", Conv(in, out, 3, 1, 1));
    time_emb_proj = register_module("time_emb_proj", nn::Linear(temb, out));
    norm2 = register_module("norm2", GN(c.norm_num_groups, out, c.norm_eps));
    conv2 = register_module("conv2", Conv(out, out, 3, 1, 1));
    if (in != out) conv_shortcut = register_module("conv_shortcut", Conv(in, out, 1));
  }
  Tensor Run(const Tensor& x, const Tensor& temb) override {
    Tensor h = conv1->forward(torch::silu(norm1->forward(x)));
    Tensor t = time_emb_proj->forward(torch::silu(temb));
    h = h + t.unsqueeze(-1).unsqueeze(-1);
    h = conv2->forward(torch::silu(norm2->forward(h)));
    Tensor skip = conv_shortcut.is_empty() ? x : conv_shortcut->forward(x);
    Tensor y = skip + h;
    return out_scale_ == 1.0 ? y : y / out_scale_;
  }

 private:
  double out_scale_;
  nn::GroupNorm norm1{nullptr}, norm2{nullptr};
  nn::Conv2d conv1{nullptr}, conv2{nullptr}, conv_shortcut{nullptr};
  nn::Linear time_emb_proj{nullptr};
};

// A module holding one "conv" (diffusers' Downsample2D / Upsample2D).
struct ConvHolder : nn::Module {
  ConvHolder(int64_t ch, int64_t stride, int64_t pad) {
    conv = register_module("conv", Conv(ch, ch, 3, stride, pad));
  }
  nn::Conv2d conv{nullptr};
};

class DownBlock : public nn::Module {
 public:
  DownBlock(const UNetConfig& c, size_t i, int64_t in, int64_t out, int64_t temb, bool attn,
            bool downsample) {
    nn::ModuleList rl, al;
    for (int j = 0; j < c.layers_per_block[i]; ++j) {
      resnets.push_back(std::make_shared<Resnet>(c, j == 0 ? in : out, out, temb));
      rl->push_back(resnets.back());
      if (attn) {
        attns.push_back(
            std::make_shared<Transformer2D>(c, out, c.num_heads[i], c.transformer_layers[i]));
        al->push_back(attns.back());
      }
    }
    register_module("resnets", rl);
    if (attn) register_module("attentions", al);
    if (downsample) {
      pad_ = c.downsample_padding;
      down = std::make_shared<ConvHolder>(out, 2, pad_);
      nn::ModuleList dl;
      dl->push_back(down);
      register_module("downsamplers", dl);
    }
  }
  Tensor forward(UNet* u, Tensor h, const Tensor& temb, const Tensor& ctx,
                 std::vector<Tensor>* skips) {
    for (size_t j = 0; j < resnets.size(); ++j) {
      h = u->Call(resnets[j].get(), h, temb);
      if (!attns.empty()) h = u->Call(attns[j].get(), h, ctx);
      skips->push_back(h);
    }
    if (down) {
      if (pad_ == 0) h = torch::constant_pad_nd(h, {0, 1, 0, 1}, 0);
      h = down->conv->forward(h);
      skips->push_back(h);
    }
    return h;
  }
  size_t num_resnets() const { return resnets.size(); }

 private:
  std::vector<std::shared_ptr<Resnet>> resnets;
  std::vector<std::shared_ptr<Transformer2D>> attns;
  std::shared_ptr<ConvHolder> down;
  int pad_ = 1;
};

class UpBlock : public nn::Module {
 public:
  UpBlock(const UNetConfig& c, int layers, int heads, int tlayers, int64_t in, int64_t out,
          int64_t prev_out, int64_t temb, bool attn, bool upsample) {
    nn::ModuleList rl, al;
    for (int j = 0; j < layers; ++j) {
      int64_t skip = j == layers - 1 ? in : out;
      int64_t res_in = j == 0 ? prev_out : out;
      resnets.push_back(std::make_shared<Resnet>(c, res_in + skip, out, temb));
      rl->push_back(resnets.back());
      if (attn) {
        attns.push_back(std::make_shared<Transformer2D>(c, out, heads, tlayers));
        al->push_back(attns.back());
      }
    }
    register_module("resnets", rl);
    if (attn) register_module("attentions", al);
    if (upsample) {
      up = std::make_shared<ConvHolder>(out, 1, 1);
      nn::ModuleList ul;
      ul->push_back(up);
      register_module("upsamplers", ul);
    }
  }
  Tensor forward(UNet* u, Tensor h, const Tensor& temb, const Tensor& ctx,
                 std::vector<Tensor>* skips) {
    for (size_t j = 0; j < resnets.size(); ++j) {
      h = torch::cat({h, skips->back()}, 1);
      skips->pop_back();
      h = u->Call(resnets[j].get(), h, temb);
      if (!attns.empty()) h = u->Call(attns[j].get(), h, ctx);
    }
    if (up) {
      // Upsample to the next skip's size (= 2x when the input is a multiple of 2^levels).
      std::vector<int64_t> size = {h.size(2) * 2, h.size(3) * 2};
      if (!skips->empty()) size = {skips->back().size(2), skips->back().size(3)};
      h = torch::upsample_nearest2d(h, size);
      h = up->conv->forward(h);
    }
    return h;
  }

 private:
  std::vector<std::shared_ptr<Resnet>> resnets;
  std::vector<std::shared_ptr<Transformer2D>> attns;
  std::shared_ptr<ConvHolder> up;
};

class MidBlock : public nn::Module {
 public:
  MidBlock(const UNetConfig& c, int64_t ch, int64_t temb) {
    size_t last = c.block_out_channels.size() - 1;
    r0 = std::make_shared<Resnet>(c, ch, ch, temb, c.mid_block_scale_factor);
    r1 = std::make_shared<Resnet>(c, ch, ch, temb, c.mid_block_scale_factor);
    attn = std::make_shared<Transformer2D>(c, ch, c.num_heads[last], c.transformer_layers[last]);
    nn::ModuleList rl, al;
    rl->push_back(r0);
    rl->push_back(r1);
    al->push_back(attn);
    register_module("attentions", al);
    register_module("resnets", rl);
  }
  Tensor forward(UNet* u, Tensor h, const Tensor& temb, const Tensor& ctx) {
    h = u->Call(r0.get(), h, temb);
    h = u->Call(attn.get(), h, ctx);
    return u->Call(r1.get(), h, temb);
  }

 private:
  std::shared_ptr<Resnet> r0, r1;
  std::shared_ptr<Transformer2D> attn;
};

namespace {

// Recomputes a Recomputable in backward (activation checkpointing). The dummy input requires
// grad so that the output does too even when x and cond do not (frozen layers before LoRA).
class CheckpointFn : public torch::autograd::Function<CheckpointFn> {
 public:
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, Tensor x,
                                                Tensor cond, Tensor dummy, int64_t fn) {
    (void)dummy;
    ctx->saved_data["fn"] = fn;
    ctx->saved_data["xg"] = x.requires_grad();
    ctx->saved_data["cg"] = cond.requires_grad();
    // Recompute under the same autocast state as the original forward.
    ctx->saved_data["autocast"] = at::autocast::is_enabled();
    ctx->saved_data["autocast_dtype"] = int64_t(at::autocast::get_autocast_gpu_dtype());
    ctx->save_for_backward({x, cond});
    torch::NoGradGuard no_grad;
    return {reinterpret_cast<Recomputable*>(fn)->Run(x, cond)};
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_out) {
    auto saved = ctx->get_saved_variables();
    auto* fn = reinterpret_cast<Recomputable*>(ctx->saved_data["fn"].toInt());
    bool xg = ctx->saved_data["xg"].toBool(), cg = ctx->saved_data["cg"].toBool();
    torch::AutoGradMode enable(true);
    Tensor x = saved[0].detach().requires_grad_(xg);
    Tensor cond = saved[1].detach().requires_grad_(cg);
    bool autocast = ctx->saved_data["autocast"].toBool();
    bool was = at::autocast::is_enabled();
    at::ScalarType was_dtype = at::autocast::get_autocast_gpu_dtype();
    if (autocast) {
      at::autocast::set_enabled(true);
      at::autocast::set_autocast_gpu_dtype(
          at::ScalarType(ctx->saved_data["autocast_dtype"].toInt()));
    }
    Tensor out = fn->Run(x, cond);
    if (autocast) {
      at::autocast::set_enabled(was);
      at::autocast::set_autocast_gpu_dtype(was_dtype);
    }
    if (out.requires_grad()) torch::autograd::backward({out}, {grad_out[0]});
    return {xg ? x.grad() : Tensor(), cg ? cond.grad() : Tensor(), Tensor(), Tensor()};
  }
};

}  // namespace

Tensor UNet::Call(Recomputable* m, const Tensor& x, const Tensor& cond) {
  if (!checkpointing_ || !torch::GradMode::is_enabled()) return m->Run(x, cond);
  return CheckpointFn::apply(x, cond, ckpt_dummy_, reinterpret_cast<int64_t>(m))[0];
}

UNet::UNet(const UNetConfig& c) : config_(c) {
  ckpt_dummy_ = torch::zeros({}, torch::requires_grad());
  int64_t ch0 = c.block_out_channels[0], temb = ch0 * 4;
  size_t n = c.block_out_channels.size();
  conv_in_ = register_module("conv_in", Conv(c.in_channels, ch0, 3, 1, 1));
  struct TimeEmb : nn::Module {
    TimeEmb(int64_t in, int64_t dim) {
      l1 = register_module("linear_1", nn::Linear(in, dim));
      l2 = register_module("linear_2", nn::Linear(dim, dim));
    }
    nn::Linear l1{nullptr}, l2{nullptr};
  };
  auto te = register_module("time_embedding", std::make_shared<TimeEmb>(ch0, temb));
  time_linear_1_ = te->l1;
  time_linear_2_ = te->l2;

  nn::ModuleList downs;
  int64_t out = ch0;
  for (size_t i = 0; i < n; ++i) {
    int64_t in = out;
    out = c.block_out_channels[i];
    down_.push_back(std::make_shared<DownBlock>(
        c, i, in, out, temb, c.down_block_types[i] == "CrossAttnDownBlock2D", i + 1 < n));
    downs->push_back(down_.back());
  }
  register_module("down_blocks", downs);
  mid_ = register_module("mid_block",
                         std::make_shared<MidBlock>(c, c.block_out_channels[n - 1], temb));

  nn::ModuleList ups;
  out = c.block_out_channels[n - 1];
  for (size_t i = 0; i < n; ++i) {
    size_t r = n - 1 - i;  // index into the per-down-block lists, reversed
    int64_t prev = out;
    out = c.block_out_channels[r];
    int64_t in = c.block_out_channels[r == 0 ? 0 : r - 1];
    up_.push_back(std::make_shared<UpBlock>(
        c, c.layers_per_block[r] + 1, c.num_heads[r], c.transformer_layers[r], in, out, prev, temb,
        c.up_block_types[i] == "CrossAttnUpBlock2D", i + 1 < n));
    ups->push_back(up_.back());
  }
  register_module("up_blocks", ups);
  conv_norm_out_ = register_module("conv_norm_out", GN(c.norm_num_groups, ch0, c.norm_eps));
  conv_out_ = register_module("conv_out", Conv(ch0, c.out_channels, 3, 1, 1));
}

Tensor TimestepEmbedding(const Tensor& timesteps, int64_t dim, bool flip_sin_to_cos,
                         double freq_shift) {
  int64_t half = dim / 2;
  Tensor exponent =
      torch::arange(0, half,
                    torch::TensorOptions().dtype(torch::kFloat32).device(timesteps.device())) *
      float(-std::log(10000.0));
  exponent = exponent / float(double(half) - freq_shift);
  Tensor emb = timesteps.to(torch::kFloat32).unsqueeze(1) * torch::exp(exponent).unsqueeze(0);
  emb = flip_sin_to_cos ? torch::cat({torch::cos(emb), torch::sin(emb)}, -1)
                        : torch::cat({torch::sin(emb), torch::cos(emb)}, -1);
  if (dim % 2 == 1) emb = torch::constant_pad_nd(emb, {0, 1, 0, 0}, 0);
  return emb;
}

Tensor UNet::forward(const Tensor& sample, const Tensor& timesteps, const Tensor& ctx) {
  Tensor t = timesteps.reshape({-1});
  if (t.size(0) != sample.size(0)) t = t.expand({sample.size(0)});
  int64_t ch0 = config_.block_out_channels[0];
  Tensor temb = TimestepEmbedding(t, ch0, config_.flip_sin_to_cos, config_.freq_shift)
                    .to(sample.scalar_type());
  temb = time_linear_2_->forward(torch::silu(time_linear_1_->forward(temb)));

  Tensor h = conv_in_->forward(sample);
  std::vector<Tensor> skips = {h};
  for (auto& d : down_) h = d->forward(this, h, temb, ctx, &skips);
  h = mid_->forward(this, h, temb, ctx);
  for (auto& u : up_) h = u->forward(this, h, temb, ctx, &skips);
  return conv_out_->forward(torch::silu(conv_norm_out_->forward(h)));
}

std::vector<std::pair<std::string, LoraLinearImpl*>> UNet::LoraTargets() {
  std::vector<std::pair<std::string, LoraLinearImpl*>> out;
  for (const auto& item : named_modules("", /*include_self=*/false)) {
    if (auto* l = dynamic_cast<LoraLinearImpl*>(item.value().get())) {
      out.emplace_back(item.key(), l);
    }
  }
  return out;
}

TensorMap RandomWeights(const UNetConfig& config, uint64_t seed) {
  torch::manual_seed(seed);
  UNet model(config);
  TensorMap out;
  for (const auto& p : model.named_parameters(true)) out[p.key()] = p.value().detach().clone();
  return out;
}

Status LoadStateDict(UNet& model, const TensorMap& weights) {
  return CatchTorch("loading UNet weights", [&]() -> Status {
    auto params = model.named_parameters(/*recurse=*/true);
    std::vector<std::string> missing, unexpected, mismatched;
    for (const auto& p : params) {
      if (!weights.count(p.key())) missing.push_back(p.key());
    }
    for (const auto& [k, v] : weights) {
      const torch::Tensor* p = params.find(k);
      if (p == nullptr) {
        unexpected.push_back(k);
      } else if (p->sizes() != v.sizes()) {
        mismatched.push_back(k);
      } else if (!v.is_floating_point()) {
        mismatched.push_back(k + " (not a float tensor)");
      }
    }
    auto list = [](const std::vector<std::string>& v) {
      std::string s;
      for (size_t i = 0; i < v.size() && i < 8; ++i) s += (i ? ", " : "") + v[i];
      if (v.size() > 8) s += ", ... (" + std::to_string(v.size()) + " in all)";
      return s;
    };
    if (!missing.empty()) return Status::Invalid("weights: missing keys: " + list(missing));
    if (!unexpected.empty()) {
      return Status::Invalid("weights: unexpected keys: " + list(unexpected));
    }
    if (!mismatched.empty()) {
      return Status::Invalid("weights: shape mismatch for: " + list(mismatched));
    }
    torch::NoGradGuard no_grad;
    for (auto& p : params) {
      p.value().copy_(weights.at(p.key()));
      p.value().set_requires_grad(false);
    }
    return Status::Ok();
  });
}

}  // namespace gleaner::train::lora_sd
