// The subset of a diffusers UNet2DConditionModel config.json that SD 1.x/2.x and SDXL UNets use.
//
// Contract: ParseUNetConfig validates every field it reads (types, lengths, ranges) and rejects
// features this implementation does not have (class embeddings, addition embeddings other than
// SDXL's "text_time", non-default time embedding, dual cross attention, ...) with an
// InvalidArgument naming the field. Per-block values are expanded here, once, exactly as
// diffusers 0.31 expands them, so the model code reads plain per-block (and per-layer) numbers.
#pragma once

#include <string>
#include <vector>

#include "agent/train/denoiser/denoiser_shape.h"
#include "shared/json.h"
#include "shared/status.h"

namespace gleaner::train::unet {

struct UNetConfig {
  int in_channels = 4;
  int out_channels = 4;
  std::vector<int> block_out_channels;
  std::vector<std::string> down_block_types;  // CrossAttnDownBlock2D | DownBlock2D
  std::vector<std::string> up_block_types;    // CrossAttnUpBlock2D | UpBlock2D
  std::vector<int> layers_per_block;          // per down block (up blocks have one more)
  std::vector<int> num_heads;                 // per down block (SD "attention_head_dim")
  // Transformer layers per attention: down[i][j] for layer j of down block i (layers_per_block[i]
  // entries), up[i][j] for layer j of up block i (layers_per_block[n-1-i] + 1 entries). The mid
  // block uses down[n-1][0], as diffusers does.
  std::vector<std::vector<int>> down_transformer_layers;
  std::vector<std::vector<int>> up_transformer_layers;
  int cross_attention_dim = 768;
  int norm_num_groups = 32;
  double norm_eps = 1e-5;
  bool use_linear_projection = false;
  bool flip_sin_to_cos = true;
  double freq_shift = 0;
  int downsample_padding = 1;
  double mid_block_scale_factor = 1;
  bool upcast_attention = false;
  std::vector<int> sample_size = {64};  // one int, or [height, width]
  // SDXL's added conditioning: addition_embed_type "text_time" ("" = none). The pooled text
  // embedding has projection_class_embeddings_input_dim - 6 * addition_time_embed_dim entries.
  std::string addition_embed_type;
  int addition_time_embed_dim = 0;
  int projection_class_embeddings_input_dim = 0;

  bool has_text_time() const { return addition_embed_type == "text_time"; }
  // Size P of the pooled text embedding (text_embeds [B, P]); 0 without text_time.
  int pooled_dim() const {
    return has_text_time() ? projection_class_embeddings_input_dim - 6 * addition_time_embed_dim
                           : 0;
  }
  int time_embed_dim() const { return 4 * block_out_channels.front(); }
};

Result<UNetConfig> ParseUNetConfig(const Json& j);
// The input sizes of a UNet of config c, as its Denoiser::shape() says (denoiser/denoiser.h).
DenoiserShape ShapeOf(const UNetConfig& c);
Json UNetConfigToJson(const UNetConfig& c);
// Fills both transformer-layer tables from one count per down block (up blocks mirror them).
void SetTransformerLayers(UNetConfig* c, const std::vector<int>& per_block);

// The named configurations below are in unet_presets.cc.
// Real architectures, for benchmarks and memory figures (weights are random there).
UNetConfig Sd15Config();  // SD 1.5: 860M parameters
UNetConfig SdxlConfig();  // SDXL base 1.0: 2.57B parameters
// Tiny configs for tests and demos: 2 levels, 32/64 channels, like the reference fixtures.
UNetConfig TinyConfig();
UNetConfig TinySdxlConfig();  // text_time (pooled size 32, addition_time_embed_dim 8), linear
                              // projections, transformer layers 1/2

}  // namespace gleaner::train::unet
