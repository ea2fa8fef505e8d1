// DenoiserShape: the input sizes of a denoiser (denoiser.h), a plain struct without libtorch so
// that configs and datasets can speak of it. Thread-compatible value type.
#pragma once

#include <cstdint>

namespace gleaner::train {

// The sizes a denoiser's inputs must have: datasets, text encoders and samplers are checked
// against them.
struct DenoiserShape {
  int64_t latent_channels = 4;  // C of x_t (the VAE's latent_channels)
  int64_t context_dim = 0;      // D of cond.text
  int64_t pooled_dim = 0;       // P of cond.pooled; 0: not used
  bool time_ids = false;        // cond.time_ids needed
  bool guidance = false;        // cond.guidance needed (FLUX dev)
  // The native latent size (pixels / VAE factor): what the model was trained at.
  int64_t sample_height = 64, sample_width = 64;
};

}  // namespace gleaner::train
