// diffusers' AutoencoderKL (the Stable Diffusion VAE) in libtorch: images to a diagonal Gaussian
// over latents, and latents back to images.
//
// Contract: parameter names are diffusers' state-dict keys; LoadVaeWeights also takes the older
// attention names (query/key/value/proj_attn, 1x1-conv shaped or not). The VAE is frozen: Encode
// and Decode run without autograd. They take inputs of any float dtype on any device, compute in
// the module's dtype on its device (fp32 unless the caller moved it to fp16, which
// VaeComputeDtype allows only for a VAE whose config says force_upcast false), and return fp32
// tensors on that device. Shapes are the caller's duty (CheckImages/CheckLatents name what is
// wrong); the math is diffusers' (eps 1e-6 GroupNorms, explicit (0,1,0,1) padding before each
// stride-2 conv, nearest 2x upsampling, single-head mid-block attention with residual).
// Not thread-safe.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <vector>

#include "agent/train/models/vae/vae_config.h"
#include "agent/train/nn/torch_io.h"

namespace gleaner::train::vae {

// DiagonalGaussianDistribution of diffusers, over [B, latent_channels, H/f, W/f].
struct LatentDist {
  torch::Tensor mean;
  torch::Tensor logvar;  // clamped to [-30, 20]
  torch::Tensor std;     // exp(logvar / 2)
  // latent_dist.sample(generator): mean + std · n with n = randn(mean's shape) drawn in fp32
  // from `cpu_generator` (a CPU generator, so the draw is the same on every device and equals
  // diffusers' with a torch.Generator("cpu") seeded alike), then moved to mean's device.
  torch::Tensor Sample(torch::Generator& cpu_generator) const;
};

class Encoder;
class Decoder;

class AutoencoderKL : public torch::nn::Module {
 public:
  explicit AutoencoderKL(const VaeConfig& config);
  // images [B, in_channels, H, W] in [-1, 1] -> [B, latent, ~H/f, ~W/f] (each 2x downsampling
  // leaves floor((s - 2) / 2) + 1 of s, as diffusers).
  LatentDist Encode(const torch::Tensor& images);
  // z [B, latent_channels, h, w] (unscaled: divide pipeline latents by scaling_factor first)
  // -> [B, out_channels, h·f, w·f], roughly in [-1, 1].
  torch::Tensor Decode(const torch::Tensor& z);
  const VaeConfig& config() const { return config_; }

 private:
  VaeConfig config_;
  std::shared_ptr<Encoder> encoder_;
  std::shared_ptr<Decoder> decoder_;
  torch::nn::Conv2d quant_conv_{nullptr}, post_quant_conv_{nullptr};
};

// fp16 only where asked for and the config allows it (force_upcast false); fp32 otherwise.
torch::ScalarType VaeComputeDtype(const VaeConfig& config, bool half_requested);
// InvalidArgument naming the problem unless x is [B, in_channels, H, W] with B >= 1 and H, W
// large enough for every 2x downsampling (2 pixels each), as diffusers accepts them.
Status CheckImages(const VaeConfig& config, const torch::Tensor& x);
// InvalidArgument unless z is [B, latent_channels, h, w] with B, h, w >= 1.
Status CheckLatents(const VaeConfig& config, const torch::Tensor& z);
// Copies weights (old attention names renamed) into the model and freezes it.
Status LoadVaeWeights(AutoencoderKL& model, const TensorMap& weights);

}  // namespace gleaner::train::vae
