// The subset of a diffusers UNet2DConditionModel config.json that SD 1.x/2.x UNets use.
//
// Contract: ParseUNetConfig validates every field it reads (types, lengths, ranges) and rejects
// features this implementation does not have (class/addition embeddings, non-default time
// embedding, dual cross attention, ...) with an InvalidArgument naming the field.
#pragma once

#include <string>
#include <vector>

#include "shared/json.h"
#include "shared/status.h"

namespace gleaner::train::lora_sd {

struct UNetConfig {
  int in_channels = 4;
  int out_channels = 4;
  std::vector<int> block_out_channels;
  std::vector<std::string> down_block_types;  // CrossAttnDownBlock2D | DownBlock2D
  std::vector<std::string> up_block_types;    // CrossAttnUpBlock2D | UpBlock2D
  std::vector<int> layers_per_block;          // per down block
  std::vector<int> num_heads;                 // per down block (SD1.x "attention_head_dim")
  std::vector<int> transformer_layers;        // per down block
  int cross_attention_dim = 768;
  int norm_num_groups = 32;
  double norm_eps = 1e-5;
  bool use_linear_projection = false;
  bool flip_sin_to_cos = true;
  double freq_shift = 0;
  int downsample_padding = 1;
  double mid_block_scale_factor = 1;
  bool upcast_attention = false;
  int sample_size = 64;
};

Result<UNetConfig> ParseUNetConfig(const Json& j);

// The SD 1.5 UNet (860M parameters) and a reduced variant of the same architecture.
UNetConfig Sd15Config();
// Tiny config for tests: 2 levels, 32/64 channels, like the reference fixture.
UNetConfig TinyConfig();
Json UNetConfigToJson(const UNetConfig& c);

}  // namespace gleaner::train::lora_sd
