// The config of a FLUX.1 transformer (diffusers' FluxTransformer2DModel config.json).
//
// Contract: ParseFluxConfig checks every field it reads (type and range) and rejects what this
// implementation does not have (patch_size other than 1, axes that do not add up to the head
// dimension) with an InvalidArgument naming the field ("config.num_layers ..."). Absent fields
// take diffusers' defaults (FLUX.1-dev's sizes); out_channels null means in_channels.
// FluxConfigToJson writes a config that ParseFluxConfig reads back to the same value. Pure
// functions; thread-compatible value type.
#pragma once

#include <cstdint>
#include <vector>

#include "shared/json.h"
#include "shared/status.h"

namespace gleaner::train::flux {

struct FluxConfig {
  int patch_size = 1;
  int in_channels = 64;   // packed tokens: 4 x the VAE's latent channels
  int out_channels = 64;  // after parsing never 0 (null = in_channels)
  int num_layers = 19;    // double-stream blocks
  int num_single_layers = 38;
  int attention_head_dim = 128;
  int num_attention_heads = 24;
  int joint_attention_dim = 4096;                  // T5 hidden size
  int pooled_projection_dim = 768;                 // CLIP-L pooled size
  bool guidance_embeds = true;                     // FLUX.1-dev: guidance is an input
  std::vector<int> axes_dims_rope = {16, 56, 56};  // sums to attention_head_dim

  int64_t inner_dim() const { return int64_t(num_attention_heads) * attention_head_dim; }
  int64_t mlp_hidden_dim() const { return 4 * inner_dim(); }
};

Result<FluxConfig> ParseFluxConfig(const Json& j);
Json FluxConfigToJson(const FluxConfig& c);
// A tiny config for tests and demos (the sizes of the flux-ref-a fixture).
FluxConfig TinyFluxConfig();
// True when a config.json is a FluxTransformer2DModel's (by its _class_name).
bool IsFluxConfig(const Json& j);

}  // namespace gleaner::train::flux
