#include "agent/train/models/unet/unet_blocks.h"

#include <cmath>

#include "agent/train/nn/attention.h"

namespace gleaner::train::unet {

namespace nn = torch::nn;
using torch::Tensor;

namespace {

nn::Conv2d Conv(int64_t in, int64_t out, int64_t k, int64_t stride = 1, int64_t pad = 0) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, k).stride(stride).padding(pad));
}
nn::GroupNorm GroupNorm(int64_t groups, int64_t ch, double eps) {
  return nn::GroupNorm(nn::GroupNormOptions(groups, ch).eps(eps));
}
nn::LayerNorm LayerNorm(int64_t dim) {
  return nn::LayerNorm(nn::LayerNormOptions({dim}).eps(1e-5).elementwise_affine(true));
}

// A one-element ModuleList "<name>.0" holding `m` (diffusers' to_out.0, downsamplers.0, ...).
template <class M>
void RegisterAsList0(nn::Module* parent, const char* name, M m) {
  nn::ModuleList list;
  list->push_back(m);
  parent->register_module(name, list);
}

// diffusers' Downsample2D / Upsample2D: a module whose only child is "conv".
struct ConvHolder : nn::Module {
  explicit ConvHolder(nn::Conv2d c) { register_module("conv", c); }
};

}  // namespace

// ---- Attention: [B,L,C] (+ context [B,T,D]) -> [B,L,C] ----

Attention::Attention(int64_t query_dim, int64_t context_dim, int64_t heads, int64_t head_dim,
                     bool upcast)
    : heads_(heads), scale_(1.0 / std::sqrt(double(head_dim))), upcast_(upcast) {
  int64_t inner = heads * head_dim;
  to_q_ = register_module("to_q", std::make_shared<LoraLinearImpl>(query_dim, inner, false));
  to_k_ = register_module("to_k", std::make_shared<LoraLinearImpl>(context_dim, inner, false));
  to_v_ = register_module("to_v", std::make_shared<LoraLinearImpl>(context_dim, inner, false));
  to_out_ = std::make_shared<LoraLinearImpl>(inner, query_dim, true);
  RegisterAsList0(this, "to_out", to_out_);
}

Tensor Attention::forward(const Tensor& x, const Tensor& context) {
  const Tensor& ctx = context.defined() ? context : x;
  Tensor q = to_q_->forward(x);    // [B, L, H*d]
  Tensor k = to_k_->forward(ctx);  // [B, T, H*d]
  Tensor v = to_v_->forward(ctx);  // [B, T, H*d]
  AttentionOptions o;
  o.heads = heads_;
  o.scale = scale_;
  o.upcast = upcast_;
  return to_out_->forward(MultiHeadAttention(q, k, v, o));  // [B, L, C]
}

// ---- FeedForward (GEGLU): [B,L,C] -> [B,L,C] ----

FeedForward::FeedForward(int64_t dim) {
  struct Geglu : nn::Module {
    explicit Geglu(nn::Linear p) { register_module("proj", p); }
  };
  proj_ = nn::Linear(dim, dim * 8);  // both GEGLU halves: [B,L,C] -> [B,L,8C]
  out_ = nn::Linear(dim * 4, dim);
  nn::ModuleList net;
  net->push_back(std::make_shared<Geglu>(proj_));
  net->push_back(nn::Dropout(0.0));
  net->push_back(out_);
  register_module("net", net);
}

Tensor FeedForward::forward(const Tensor& x) {
  std::vector<Tensor> halves = BaseLinear(proj_, x).chunk(2, -1);  // 2 x [B,L,4C]
  return BaseLinear(out_, halves[0] * torch::gelu(halves[1]));     // [B,L,C]
}

// ---- TransformerBlock: h [B,L,C], context [B,T,D] -> [B,L,C] ----

TransformerBlock::TransformerBlock(int64_t dim, int64_t heads, int64_t context_dim, bool upcast) {
  int64_t head_dim = dim / heads;
  norm1_ = register_module("norm1", LayerNorm(dim));
  attn1_ = register_module("attn1", std::make_shared<Attention>(dim, dim, heads, head_dim, upcast));
  norm2_ = register_module("norm2", LayerNorm(dim));
  attn2_ = register_module("attn2",
                           std::make_shared<Attention>(dim, context_dim, heads, head_dim, upcast));
  norm3_ = register_module("norm3", LayerNorm(dim));
  ff_ = register_module("ff", std::make_shared<FeedForward>(dim));
}

Tensor TransformerBlock::Run(const Tensor& h0, const Tensor& context) {
  Tensor h = attn1_->forward(norm1_->forward(h0), Tensor()) + h0;  // self-attention
  h = attn2_->forward(norm2_->forward(h), context) + h;            // cross-attention on text
  return ff_->forward(norm3_->forward(h)) + h;
}

// ---- Transformer2D: x [B,C,H,W], context [B,T,D] -> [B,C,H,W] ----

Transformer2D::Transformer2D(const UNetConfig& c, int64_t channels, int64_t heads, int64_t layers)
    : linear_(c.use_linear_projection) {
  norm_ = register_module("norm", GroupNorm(c.norm_num_groups, channels, 1e-6));
  if (linear_) {
    lin_in_ = register_module("proj_in", nn::Linear(channels, channels));
  } else {
    conv_in_ = register_module("proj_in", Conv(channels, channels, 1));
  }
  nn::ModuleList list;
  for (int64_t i = 0; i < layers; ++i) {
    blocks_.push_back(std::make_shared<TransformerBlock>(channels, heads, c.cross_attention_dim,
                                                         c.upcast_attention));
    list->push_back(blocks_.back());
  }
  register_module("transformer_blocks", list);
  if (linear_) {
    lin_out_ = register_module("proj_out", nn::Linear(channels, channels));
  } else {
    conv_out_ = register_module("proj_out", Conv(channels, channels, 1));
  }
}

Tensor Transformer2D::forward(Checkpointer& ckpt, const Tensor& x, const Tensor& context) {
  int64_t b = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
  Tensor t = norm_->forward(x);
  auto to_tokens = [&](const Tensor& img) {  // [B,C,H,W] -> [B,L,C]
    return img.permute({0, 2, 3, 1}).reshape({b, h * w, c});
  };
  auto to_image = [&](const Tensor& tok) {  // [B,L,C] -> [B,C,H,W]
    return tok.reshape({b, h, w, c}).permute({0, 3, 1, 2}).contiguous();
  };
  t = linear_ ? BaseLinear(lin_in_, to_tokens(t)) : to_tokens(conv_in_->forward(t));
  for (auto& blk : blocks_) t = ckpt.Run(blk.get(), t, context);
  t = linear_ ? to_image(BaseLinear(lin_out_, t)) : conv_out_->forward(to_image(t));
  return t + x;
}

// ---- Resnet: x [B,Cin,H,W], temb [B,E] -> [B,Cout,H,W] ----

Resnet::Resnet(const UNetConfig& c, int64_t in, int64_t out, double out_scale)
    : out_scale_(out_scale) {
  norm1_ = register_module("norm1", GroupNorm(c.norm_num_groups, in, c.norm_eps));
  conv1_ = register_module("conv1", Conv(in, out, 3, 1, 1));
  time_emb_proj_ = register_module("time_emb_proj", nn::Linear(c.time_embed_dim(), out));
  norm2_ = register_module("norm2", GroupNorm(c.norm_num_groups, out, c.norm_eps));
  conv2_ = register_module("conv2", Conv(out, out, 3, 1, 1));
  if (in != out) conv_shortcut_ = register_module("conv_shortcut", Conv(in, out, 1));
}

Tensor Resnet::Run(const Tensor& x, const Tensor& temb) {
  Tensor h = conv1_->forward(torch::silu(norm1_->forward(x)));  // [B,Cout,H,W]
  Tensor t = BaseLinear(time_emb_proj_, torch::silu(temb));     // [B,Cout]
  h = h + t.unsqueeze(-1).unsqueeze(-1);
  h = conv2_->forward(torch::silu(norm2_->forward(h)));
  Tensor skip = conv_shortcut_.is_empty() ? x : conv_shortcut_->forward(x);
  Tensor y = skip + h;
  return out_scale_ == 1.0 ? y : y / out_scale_;
}

// ---- LayerStack: layer j is [B,Cin,H,W] -> [B,Cout,H,W] ----

void LayerStack::AddLayer(const UNetConfig& c, int64_t in, int64_t out, bool attn, int64_t heads,
                          int64_t transformer_layers) {
  resnets_.push_back(std::make_shared<Resnet>(c, in, out));
  if (attn) {
    attentions_.push_back(std::make_shared<Transformer2D>(c, out, heads, transformer_layers));
  }
}

void LayerStack::RegisterLayers() {
  nn::ModuleList resnets, attentions;
  for (auto& r : resnets_) resnets->push_back(r);
  for (auto& a : attentions_) attentions->push_back(a);
  register_module("resnets", resnets);
  if (!attentions_.empty()) register_module("attentions", attentions);
}

Tensor LayerStack::RunLayer(size_t j, const Tensor& h, const BlockInputs& in) {
  Tensor y = in.ckpt->Run(resnets_[j].get(), h, in.temb);
  return attentions_.empty() ? y : attentions_[j]->forward(*in.ckpt, y, in.context);
}

// ---- DownBlock i: [B,Cin,H,W] -> [B,Cout,H/2,W/2], pushing one skip per layer (+1) ----

DownBlock::DownBlock(const UNetConfig& c, size_t i, int64_t in, int64_t out) {
  bool attn = c.down_block_types[i] == "CrossAttnDownBlock2D";
  for (int j = 0; j < c.layers_per_block[i]; ++j) {
    AddLayer(c, j == 0 ? in : out, out, attn, c.num_heads[i], c.down_transformer_layers[i][j]);
  }
  RegisterLayers();
  if (i + 1 < c.block_out_channels.size()) {  // every block but the last halves H and W
    pad_ = c.downsample_padding;
    down_ = Conv(out, out, 3, 2, pad_);
    RegisterAsList0(this, "downsamplers", std::make_shared<ConvHolder>(down_));
  }
}

Tensor DownBlock::forward(Tensor h, const BlockInputs& in, std::vector<Tensor>* skips) {
  for (size_t j = 0; j < num_layers(); ++j) {
    h = RunLayer(j, h, in);  // [B,Cout,H,W]
    skips->push_back(h);
  }
  if (!down_.is_empty()) {
    if (pad_ == 0) h = torch::constant_pad_nd(h, {0, 1, 0, 1}, 0);  // diffusers' padding=0 rule
    h = down_->forward(h);                                          // [B,Cout,H/2,W/2]
    skips->push_back(h);
  }
  return h;
}

// ---- MidBlock: [B,C,h,w] -> [B,C,h,w] ----

MidBlock::MidBlock(const UNetConfig& c) {
  size_t last = c.block_out_channels.size() - 1;
  int64_t ch = c.block_out_channels[last];
  resnet0_ = std::make_shared<Resnet>(c, ch, ch, c.mid_block_scale_factor);
  resnet1_ = std::make_shared<Resnet>(c, ch, ch, c.mid_block_scale_factor);
  attention_ =
      std::make_shared<Transformer2D>(c, ch, c.num_heads[last], c.down_transformer_layers[last][0]);
  RegisterAsList0(this, "attentions", attention_);
  nn::ModuleList resnets;
  resnets->push_back(resnet0_);
  resnets->push_back(resnet1_);
  register_module("resnets", resnets);
}

Tensor MidBlock::forward(Tensor h, const BlockInputs& in) {
  h = in.ckpt->Run(resnet0_.get(), h, in.temb);
  h = attention_->forward(*in.ckpt, h, in.context);
  return in.ckpt->Run(resnet1_.get(), h, in.temb);
}

// ---- UpBlock i: [B,Cprev,h,w] + skips -> [B,Cout,2h,2w] ----

UpBlock::UpBlock(const UNetConfig& c, size_t i, int64_t prev_out) {
  const size_t n = c.block_out_channels.size(), r = n - 1 - i;  // r: the mirrored down block
  const int64_t out = c.block_out_channels[r];
  const int64_t in = c.block_out_channels[r == 0 ? 0 : r - 1];  // channels of its last skip
  const int layers = c.layers_per_block[r] + 1;
  bool attn = c.up_block_types[i] == "CrossAttnUpBlock2D";
  for (int j = 0; j < layers; ++j) {
    int64_t skip = j == layers - 1 ? in : out;
    int64_t res_in = j == 0 ? prev_out : out;
    AddLayer(c, res_in + skip, out, attn, c.num_heads[r], c.up_transformer_layers[i][j]);
  }
  RegisterLayers();
  if (i + 1 < n) {  // every block but the last doubles H and W
    up_ = Conv(out, out, 3, 1, 1);
    RegisterAsList0(this, "upsamplers", std::make_shared<ConvHolder>(up_));
  }
}

Tensor UpBlock::forward(Tensor h, const BlockInputs& in, std::vector<Tensor>* skips) {
  for (size_t j = 0; j < num_layers(); ++j) {
    h = torch::cat({h, skips->back()}, 1);  // [B,Ch+Cskip,h,w]
    skips->pop_back();
    h = RunLayer(j, h, in);  // [B,Cout,h,w]
  }
  if (!up_.is_empty()) {
    // To the next skip's size (= 2x when the input is a multiple of 2^levels), as diffusers.
    std::vector<int64_t> size = {h.size(2) * 2, h.size(3) * 2};
    if (!skips->empty()) size = {skips->back().size(2), skips->back().size(3)};
    h = up_->forward(torch::upsample_nearest2d(h, size));  // [B,Cout,2h,2w]
  }
  return h;
}

}  // namespace gleaner::train::unet
