#include "agent/train/models/vae/autoencoder_kl.h"

#include <cstring>
#include <string>

#include "agent/train/models/vae/blocks.h"
#include "agent/train/nn/module_weights.h"

namespace gleaner::train::vae {

using torch::Tensor;

Tensor LatentDist::Sample(torch::Generator& cpu_generator) const {
  Tensor n = torch::randn(mean.sizes(), cpu_generator, torch::kFloat32);
  return mean + std * n.to(mean.device(), mean.scalar_type());
}

AutoencoderKL::AutoencoderKL(const VaeConfig& c) : config_(c) {
  encoder_ = register_module("encoder", std::make_shared<Encoder>(c));
  decoder_ = register_module("decoder", std::make_shared<Decoder>(c));
  int64_t l = c.latent_channels;
  if (c.use_quant_conv) {
    quant_conv_ = register_module("quant_conv", torch::nn::Conv2d(2 * l, 2 * l, 1));
  }
  if (c.use_post_quant_conv) {
    post_quant_conv_ = register_module("post_quant_conv", torch::nn::Conv2d(l, l, 1));
  }
}

LatentDist AutoencoderKL::Encode(const Tensor& images) {
  torch::NoGradGuard no_grad;
  Tensor p = encoder_->parameters().front();
  Tensor h = encoder_->forward(images.to(p.device(), p.scalar_type()));  // [B, 2L, h, w]
  if (!quant_conv_.is_empty()) h = quant_conv_->forward(h);
  std::vector<Tensor> moments = h.to(torch::kFloat32).chunk(2, 1);
  LatentDist d;
  d.mean = moments[0];
  d.logvar = moments[1].clamp(-30.0, 20.0);
  d.std = torch::exp(0.5 * d.logvar);
  return d;
}

Tensor AutoencoderKL::Decode(const Tensor& z) {
  torch::NoGradGuard no_grad;
  Tensor p = decoder_->parameters().front();
  Tensor h = z.to(p.device(), p.scalar_type());
  if (!post_quant_conv_.is_empty()) h = post_quant_conv_->forward(h);
  return decoder_->forward(h).to(torch::kFloat32);
}

torch::ScalarType VaeComputeDtype(const VaeConfig& config, bool half_requested) {
  return half_requested && !config.force_upcast ? torch::kHalf : torch::kFloat32;
}

namespace {

std::string Shape(const Tensor& t) {
  std::string s = "[";
  for (int64_t i = 0; i < t.dim(); ++i) s += (i ? "," : "") + std::to_string(t.size(i));
  return s + "]";
}

}  // namespace

Status CheckImages(const VaeConfig& c, const Tensor& x) {
  if (!x.defined() || x.dim() != 4 || !x.is_floating_point()) {
    return Status::Invalid("images must be a float tensor [B, " + std::to_string(c.in_channels) +
                           ", H, W]" + (x.defined() ? ", got " + Shape(x) : ""));
  }
  if (x.size(0) < 1 || x.size(1) != c.in_channels) {
    return Status::Invalid("images must have " + std::to_string(c.in_channels) +
                           " channels (shape [B, C, H, W]), got " + Shape(x));
  }
  // Each 2x downsampling (pad right/bottom by 1, 3x3 conv, stride 2) needs 2 pixels and leaves
  // floor((s - 2) / 2) + 1, as in diffusers; sizes need not be multiples of the factor.
  const int downsamplings = int(c.block_out_channels.size()) - 1;
  for (int64_t s : {x.size(2), x.size(3)}) {
    bool fits = s >= 1;
    for (int i = 0; i < downsamplings && fits; ++i) {
      fits = s >= 2;
      s = (s - 2) / 2 + 1;
    }
    if (!fits) {
      return Status::Invalid("image height and width are too small for the VAE's " +
                             std::to_string(downsamplings) + " 2x downsamplings, got " + Shape(x));
    }
  }
  return Status::Ok();
}

Status CheckLatents(const VaeConfig& c, const Tensor& z) {
  if (!z.defined() || z.dim() != 4 || !z.is_floating_point() || z.size(0) < 1 ||
      z.size(1) != c.latent_channels || z.size(2) < 1 || z.size(3) < 1) {
    return Status::Invalid("latents must be a float tensor [B, " +
                           std::to_string(c.latent_channels) + ", h, w]" +
                           (z.defined() ? ", got " + Shape(z) : ""));
  }
  return Status::Ok();
}

Status LoadVaeWeights(AutoencoderKL& model, const TensorMap& weights) {
  // diffusers' _convert_deprecated_attention_blocks: the mid block's attention once had
  // query/key/value/proj_attn (as Linear [C, C], or as 1x1 convs [C, C, 1, 1]).
  const std::pair<const char*, const char*> renames[] = {{".query.", ".to_q."},
                                                         {".key.", ".to_k."},
                                                         {".value.", ".to_v."},
                                                         {".proj_attn.", ".to_out.0."}};
  TensorMap renamed;
  for (const auto& [key, value] : weights) {
    std::string k = key;
    torch::Tensor v = value;
    if (k.find(".mid_block.attentions.") != std::string::npos) {
      for (const auto& [from, to] : renames) {
        size_t at = k.find(from);
        if (at != std::string::npos) k.replace(at, std::strlen(from), to);
      }
      if (v.dim() == 4 && v.size(2) == 1 && v.size(3) == 1) v = v.flatten(1);
    }
    if (!renamed.emplace(k, v).second) {
      return Status::Invalid("VAE weights: both the old and the new name of " + k + " are present");
    }
  }
  return LoadModuleWeights(model, renamed, "VAE weights");
}

}  // namespace gleaner::train::vae
