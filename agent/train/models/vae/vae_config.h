// A diffusers AutoencoderKL config.json (the `vae/` folder of a model).
//
// Contract: ParseVaeConfig validates every field it reads and refuses, naming the field, what
// this implementation does not have: another `_class_name`, block types other than
// DownEncoderBlock2D/UpDecoderBlock2D, activations other than SiLU, per-channel
// latents_mean/latents_std. Missing fields take AutoencoderKL's defaults.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "shared/json.h"
#include "shared/status.h"

namespace gleaner::train::vae {

struct VaeConfig {
  int in_channels = 3;
  int out_channels = 3;
  std::vector<int> block_out_channels = {64};  // one per level; 2^(levels-1) is the spatial factor
  int layers_per_block = 1;
  int latent_channels = 4;
  int norm_num_groups = 32;
  double scaling_factor = 0.18215;     // SD 1.x/2.x; SDXL's VAE says 0.13025
  std::optional<double> shift_factor;  // latents = (z - shift) · scale (SD3/Flux-style VAEs)
  bool force_upcast = true;            // false: the VAE is safe to run in fp16
  bool use_quant_conv = true;
  bool use_post_quant_conv = true;
  bool mid_block_add_attention = true;

  // Image side / latent side: 2^(levels - 1).
  int spatial_factor() const { return 1 << (int(block_out_channels.size()) - 1); }
};

Result<VaeConfig> ParseVaeConfig(const Json& j);
// Reads and parses a config.json file (errors name the file).
Result<VaeConfig> LoadVaeConfig(const std::string& path);

}  // namespace gleaner::train::vae
