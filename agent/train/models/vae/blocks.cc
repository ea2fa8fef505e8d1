#include "agent/train/models/vae/blocks.h"

#include <cmath>

#include "agent/train/nn/attention.h"

namespace gleaner::train::vae {

namespace nn = torch::nn;
using torch::Tensor;

namespace {

constexpr double kEps = 1e-6;  // every GroupNorm of the VAE

nn::Conv2d Conv(int64_t in, int64_t out, int64_t k, int64_t stride = 1, int64_t pad = 0) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, k).stride(stride).padding(pad));
}
nn::GroupNorm GN(int64_t groups, int64_t ch) {
  return nn::GroupNorm(nn::GroupNormOptions(groups, ch).eps(kEps));
}

// Downsample2D / Upsample2D: a module holding one 3x3 "conv".
struct ConvHolder : nn::Module {
  ConvHolder(int64_t ch, int64_t stride) {
    conv = register_module("conv", Conv(ch, ch, 3, stride, stride == 1 ? 1 : 0));
  }
  nn::Conv2d conv{nullptr};
};

}  // namespace

// ResnetBlock2D, temb None: x + conv2(silu(norm2(conv1(silu(norm1(x)))))), 1x1 shortcut when
// the channel count changes.
class ResnetBlock : public nn::Module {
 public:
  ResnetBlock(int64_t groups, int64_t in, int64_t out) {
    norm1 = register_module("norm1", GN(groups, in));
    conv1 = register_module("conv1", Conv(in, out, 3, 1, 1));
    norm2 = register_module("norm2", GN(groups, out));
    conv2 = register_module("conv2", Conv(out, out, 3, 1, 1));
    if (in != out) shortcut = register_module("conv_shortcut", Conv(in, out, 1));
  }
  Tensor forward(const Tensor& x) {
    Tensor h = conv1->forward(torch::silu(norm1->forward(x)));
    h = conv2->forward(torch::silu(norm2->forward(h)));
    return (shortcut.is_empty() ? x : shortcut->forward(x)) + h;
  }

 private:
  nn::GroupNorm norm1{nullptr}, norm2{nullptr};
  nn::Conv2d conv1{nullptr}, conv2{nullptr}, shortcut{nullptr};
};

// The mid block's Attention: GroupNorm, one head over the H·W positions (head_dim = C), output
// projection, residual.
class SpatialSelfAttention : public nn::Module {
 public:
  SpatialSelfAttention(int64_t groups, int64_t ch) : scale_(1.0 / std::sqrt(double(ch))) {
    group_norm = register_module("group_norm", GN(groups, ch));
    to_q = register_module("to_q", nn::Linear(ch, ch));
    to_k = register_module("to_k", nn::Linear(ch, ch));
    to_v = register_module("to_v", nn::Linear(ch, ch));
    to_out0 = nn::Linear(ch, ch);
    nn::ModuleList to_out;
    to_out->push_back(to_out0);
    register_module("to_out", to_out);
  }
  Tensor forward(const Tensor& x) {
    int64_t b = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
    Tensor t = group_norm->forward(x).view({b, c, h * w}).transpose(1, 2);  // [B, HW, C]
    AttentionOptions o;
    o.heads = 1;
    o.scale = scale_;
    o.upcast = true;  // diffusers' upcast_softmax for this block
    Tensor a = MultiHeadAttention(to_q->forward(t), to_k->forward(t), to_v->forward(t), o);
    Tensor out = to_out0->forward(a).transpose(1, 2).reshape({b, c, h, w});
    return out + x;
  }

 private:
  double scale_;
  nn::GroupNorm group_norm{nullptr};
  nn::Linear to_q{nullptr}, to_k{nullptr}, to_v{nullptr}, to_out0{nullptr};
};

// UNetMidBlock2D without time embedding: resnet, [attention], resnet.
class MidBlock : public nn::Module {
 public:
  MidBlock(const VaeConfig& c, int64_t ch) {
    nn::ModuleList rl, al;
    r0 = std::make_shared<ResnetBlock>(c.norm_num_groups, ch, ch);
    r1 = std::make_shared<ResnetBlock>(c.norm_num_groups, ch, ch);
    rl->push_back(r0);
    rl->push_back(r1);
    if (c.mid_block_add_attention) {
      attn = std::make_shared<SpatialSelfAttention>(c.norm_num_groups, ch);
      al->push_back(attn);
      register_module("attentions", al);
    }
    register_module("resnets", rl);
  }
  Tensor forward(Tensor h) {
    h = r0->forward(h);
    if (attn) h = attn->forward(h);
    return r1->forward(h);
  }

 private:
  std::shared_ptr<ResnetBlock> r0, r1;
  std::shared_ptr<SpatialSelfAttention> attn;
};

// DownEncoderBlock2D: layers_per_block resnets, then (not on the last level) a stride-2 conv
// after zero padding of one column right and one row below.
class DownEncoderBlock : public nn::Module {
 public:
  DownEncoderBlock(const VaeConfig& c, int64_t in, int64_t out, bool downsample) {
    nn::ModuleList rl;
    for (int j = 0; j < c.layers_per_block; ++j) {
      resnets.push_back(std::make_shared<ResnetBlock>(c.norm_num_groups, j == 0 ? in : out, out));
      rl->push_back(resnets.back());
    }
    register_module("resnets", rl);
    if (downsample) {
      down = std::make_shared<ConvHolder>(out, 2);
      nn::ModuleList dl;
      dl->push_back(down);
      register_module("downsamplers", dl);
    }
  }
  Tensor forward(Tensor h) {
    for (auto& r : resnets) h = r->forward(h);
    if (down) h = down->conv->forward(torch::constant_pad_nd(h, {0, 1, 0, 1}, 0));
    return h;
  }

 private:
  std::vector<std::shared_ptr<ResnetBlock>> resnets;
  std::shared_ptr<ConvHolder> down;
};

// UpDecoderBlock2D: layers_per_block + 1 resnets, then (not on the last level) nearest 2x
// upsampling and a 3x3 conv.
class UpDecoderBlock : public nn::Module {
 public:
  UpDecoderBlock(const VaeConfig& c, int64_t in, int64_t out, bool upsample) {
    nn::ModuleList rl;
    for (int j = 0; j < c.layers_per_block + 1; ++j) {
      resnets.push_back(std::make_shared<ResnetBlock>(c.norm_num_groups, j == 0 ? in : out, out));
      rl->push_back(resnets.back());
    }
    register_module("resnets", rl);
    if (upsample) {
      up = std::make_shared<ConvHolder>(out, 1);
      nn::ModuleList ul;
      ul->push_back(up);
      register_module("upsamplers", ul);
    }
  }
  Tensor forward(Tensor h) {
    for (auto& r : resnets) h = r->forward(h);
    if (up) h = up->conv->forward(torch::upsample_nearest2d(h, {h.size(2) * 2, h.size(3) * 2}));
    return h;
  }

 private:
  std::vector<std::shared_ptr<ResnetBlock>> resnets;
  std::shared_ptr<ConvHolder> up;
};

Encoder::Encoder(const VaeConfig& c) {
  const std::vector<int>& ch = c.block_out_channels;
  size_t n = ch.size();
  conv_in_ = register_module("conv_in", Conv(c.in_channels, ch[0], 3, 1, 1));
  nn::ModuleList downs;
  for (size_t i = 0; i < n; ++i) {
    down_.push_back(
        std::make_shared<DownEncoderBlock>(c, ch[i == 0 ? 0 : i - 1], ch[i], i + 1 < n));
    downs->push_back(down_.back());
  }
  register_module("down_blocks", downs);
  mid_ = register_module("mid_block", std::make_shared<MidBlock>(c, ch[n - 1]));
  norm_out_ = register_module("conv_norm_out", GN(c.norm_num_groups, ch[n - 1]));
  conv_out_ = register_module("conv_out", Conv(ch[n - 1], 2 * c.latent_channels, 3, 1, 1));
}

Tensor Encoder::forward(Tensor x) {
  x = conv_in_->forward(x);                 // [B, ch0, H, W]
  for (auto& d : down_) x = d->forward(x);  // [B, ch_last, H/f, W/f]
  x = mid_->forward(x);
  return conv_out_->forward(torch::silu(norm_out_->forward(x)));  // [B, 2·latent, H/f, W/f]
}

Decoder::Decoder(const VaeConfig& c) {
  const std::vector<int>& ch = c.block_out_channels;
  size_t n = ch.size();
  conv_in_ = register_module("conv_in", Conv(c.latent_channels, ch[n - 1], 3, 1, 1));
  mid_ = register_module("mid_block", std::make_shared<MidBlock>(c, ch[n - 1]));
  nn::ModuleList ups;
  for (size_t i = 0; i < n; ++i) {
    size_t r = n - 1 - i;  // levels in reverse
    up_.push_back(
        std::make_shared<UpDecoderBlock>(c, ch[i == 0 ? n - 1 : r + 1], ch[r], i + 1 < n));
    ups->push_back(up_.back());
  }
  register_module("up_blocks", ups);
  norm_out_ = register_module("conv_norm_out", GN(c.norm_num_groups, ch[0]));
  conv_out_ = register_module("conv_out", Conv(ch[0], c.out_channels, 3, 1, 1));
}

Tensor Decoder::forward(Tensor z) {
  Tensor h = conv_in_->forward(z);  // [B, ch_last, h, w]
  h = mid_->forward(h);
  for (auto& u : up_) h = u->forward(h);                          // [B, ch0, h·f, w·f]
  return conv_out_->forward(torch::silu(norm_out_->forward(h)));  // [B, out, h·f, w·f]
}

}  // namespace gleaner::train::vae
