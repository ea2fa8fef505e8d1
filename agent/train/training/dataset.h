// lora-sd training data: precomputed VAE latents and text embeddings in one safetensors file.
//
//   latents                      F32/F16/BF16 [N, C, h, w]  (C = the denoiser's latent channels)
//   text_embeddings              F32/F16/BF16 [N, T, D]     (D = its context width)
//   pooled_text_embeddings       [N, P]  SDXL and FLUX (P = its pooled width)
//   time_ids                     [N, 6]  SDXL only: orig_h, orig_w, crop_top, crop_left,
//                                        target_h, target_w (pixels)
//   class_latents, class_text_embeddings (, class_pooled_text_embeddings, class_time_ids)
//                                optional [M, ...] twins for prior preservation (M >= 1)
//
// Contract: Load validates names, ranks, matching N/M, C, D, h and w a multiple of 8 (the denoiser
// downsamples), finiteness, and that the pooled embeddings are there exactly when the denoiser's
// shape (denoiser/denoiser_shape.h) has a pooled width P, the time ids exactly when it asks for
// them; errors are one
// line naming the tensor and the expected shape. Everything is converted to fp32 CPU tensors.
// docs/training.md documents it.
#pragma once

#include <torch/torch.h>

#include <string>

#include "agent/train/denoiser/denoiser_shape.h"
#include "shared/status.h"

namespace gleaner::train::training {

// One set of examples (instance or class): undefined pooled/time_ids for SD 1.x/2.x.
struct Examples {
  torch::Tensor latents, text, pooled, time_ids;  // [N,C,h,w], [N,T,D], [N,P], [N,6]
  int64_t size() const { return latents.defined() ? latents.size(0) : 0; }
};

struct Dataset {
  Examples instance;
  Examples prior;  // empty without prior-preservation data
  int64_t size() const { return instance.size(); }
  bool has_prior() const { return prior.size() > 0; }
};

Result<Dataset> LoadDataset(const std::string& path, const DenoiserShape& shape);

struct MakeDatasetOptions {
  int64_t n = 16, size = 16, tokens = 8, dim = 32, channels = 4, classes = 4;
  int64_t pooled = 0;    // > 0: pooled_text_embeddings [N, pooled] (and time_ids with time_ids)
  bool time_ids = true;  // with pooled > 0: SDXL's time_ids too (false: FLUX)
  uint64_t seed = 0;
  bool prior = false;
};
// Deterministic synthetic data with a learnable signal: each example belongs to one of
// `classes` concepts; its text (and pooled) embedding is the concept's embedding and its latent
// the concept's smooth pattern, both plus a little noise. SDXL time_ids say the examples were
// (size*8)^2 images, uncropped.
Result<std::string> MakeDataset(const MakeDatasetOptions& o);

}  // namespace gleaner::train::training
