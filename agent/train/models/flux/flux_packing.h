// FLUX's latent packing (FluxPipeline._pack_latents / _unpack_latents /
// _prepare_latent_image_ids): a [B,C,h,w] latent is cut into 2x2 patches, each one token of 4C
// channels (channel-major: c, then row and column within the patch), tokens in row-major order;
// an image token's id is (0, row, col) on the h/2 x w/2 grid.
//
// Contract: pure functions; h and w must be even (c10::Error otherwise).
#pragma once

#include <torch/torch.h>

#include <cstdint>

namespace gleaner::train::flux {

// [B,C,h,w] -> [B,(h/2)(w/2),4C]
torch::Tensor PackLatents(const torch::Tensor& latents);
// [B,(h/2)(w/2),4C] -> [B,C,h,w]
torch::Tensor UnpackLatents(const torch::Tensor& tokens, int64_t h, int64_t w);
// [rows*cols, 3] fp32: (0, row, col) in row-major order (rows = h/2, cols = w/2).
torch::Tensor LatentImageIds(int64_t rows, int64_t cols, const torch::Device& device = torch::kCPU);

}  // namespace gleaner::train::flux
