// lora-sd training data: precomputed VAE latents and text embeddings in one safetensors file.
//
//   latents               F32/F16/BF16 [N, C, h, w]   (C = UNet in_channels, usually 4)
//   text_embeddings       F32/F16/BF16 [N, T, D]      (D = cross_attention_dim)
//   class_latents         optional [M, C, h, w]       (prior preservation; M >= 1)
//   class_text_embeddings optional [M, T, D]
//
// Contract: Load validates names, ranks, matching N/M, C, D, h and w a multiple of 8 (the UNet
// downsamples); everything is converted to fp32 CPU tensors. docs/training.md documents it.
#pragma once

#include <torch/torch.h>

#include <string>

#include "shared/status.h"

namespace gleaner::train::lora_sd {

struct Dataset {
  torch::Tensor latents, text;              // [N,C,h,w], [N,T,D]
  torch::Tensor class_latents, class_text;  // undefined without prior data
  int64_t size() const { return latents.size(0); }
  bool has_prior() const { return class_latents.defined(); }
};

Result<Dataset> LoadDataset(const std::string& path, int64_t channels, int64_t context_dim);

struct MakeDatasetOptions {
  int64_t n = 16, size = 16, tokens = 8, dim = 32, channels = 4, classes = 4;
  uint64_t seed = 0;
  bool prior = false;
};
// Deterministic synthetic data with a learnable signal: each example belongs to one of
// `classes` concepts; its text embedding is the concept's embedding and its latent the
// concept's smooth pattern, both plus a little noise.
Result<std::string> MakeDataset(const MakeDatasetOptions& o);

}  // namespace gleaner::train::lora_sd
