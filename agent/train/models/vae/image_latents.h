// What pipelines do around the VAE: images in [-1, 1] to the latents a UNet trains on, and
// sampled latents back to 8-bit images.
//
// Contract: as diffusers' training scripts and pipelines,
//   latents = (latent_dist.sample(generator) − shift_factor) · scaling_factor
//   images  = round((Decode(latents / scaling_factor + shift_factor) / 2 + 0.5).clamp(0, 1) · 255)
// (shift_factor only when the config has one; rounding half to even, as numpy's). Inputs are
// checked first (CheckImages/CheckLatents), so outside data gives InvalidArgument, never a
// libtorch exception. Deterministic for a generator state on a given device; the noise is drawn
// on the CPU, so it is the same on every device. Not thread-safe (the model is not).
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "agent/train/models/vae/autoencoder_kl.h"
#include "shared/status.h"

namespace gleaner::train::vae {

// z (a sample of the latent distribution) -> diffusion latents, and back.
torch::Tensor ScaleLatents(const VaeConfig& config, const torch::Tensor& z);
torch::Tensor UnscaleLatents(const VaeConfig& config, const torch::Tensor& latents);
// Decoder output [B, C, H, W] -> uint8 [B, C, H, W] (CPU).
torch::Tensor DecodedToU8(const torch::Tensor& decoded);

// images [B, in, H, W] in [-1, 1], H and W multiples of f (so that they decode back to their
// size; InvalidArgument otherwise) -> latents [B, latent, H/f, W/f] fp32.
Result<torch::Tensor> EncodeToLatents(AutoencoderKL& vae, const torch::Tensor& images,
                                      torch::Generator& cpu_generator);
// latents [B, latent, h, w] -> uint8 images [B, out, h·f, w·f] on the CPU.
Result<torch::Tensor> DecodeToImages(AutoencoderKL& vae, const torch::Tensor& latents);
// uint8 RGB images [B, 3, H, W] (DecodeToImages' output) -> the bytes of one PNG file per image
// (libpng, deterministic: images/png_encode.h). InvalidArgument for another shape or dtype.
Result<std::vector<std::string>> EncodePngs(const torch::Tensor& images_u8);

}  // namespace gleaner::train::vae
