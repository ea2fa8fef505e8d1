// Internal to vae/: the Encoder and Decoder halves of AutoencoderKL and the blocks they are made
// of (diffusers' vae.py Encoder/Decoder, ResnetBlock2D without time embedding, UNetMidBlock2D,
// DownEncoderBlock2D, UpDecoderBlock2D). Module names are diffusers' state-dict names.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <vector>

#include "agent/train/models/vae/vae_config.h"

namespace gleaner::train::vae {

class ResnetBlock;
class MidBlock;
class DownEncoderBlock;
class UpDecoderBlock;

// [B, in, H, W] -> [B, 2·latent, H/f, W/f] (moments before quant_conv).
class Encoder : public torch::nn::Module {
 public:
  explicit Encoder(const VaeConfig& c);
  torch::Tensor forward(torch::Tensor x);

 private:
  torch::nn::Conv2d conv_in_{nullptr}, conv_out_{nullptr};
  std::vector<std::shared_ptr<DownEncoderBlock>> down_;
  std::shared_ptr<MidBlock> mid_;
  torch::nn::GroupNorm norm_out_{nullptr};
};

// [B, latent, h, w] (after post_quant_conv) -> [B, out, h·f, w·f].
class Decoder : public torch::nn::Module {
 public:
  explicit Decoder(const VaeConfig& c);
  torch::Tensor forward(torch::Tensor z);

 private:
  torch::nn::Conv2d conv_in_{nullptr}, conv_out_{nullptr};
  std::shared_ptr<MidBlock> mid_;
  std::vector<std::shared_ptr<UpDecoderBlock>> up_;
  torch::nn::GroupNorm norm_out_{nullptr};
};

}  // namespace gleaner::train::vae
