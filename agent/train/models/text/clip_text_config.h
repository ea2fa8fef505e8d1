// The configuration of a CLIP text encoder, read from a transformers `config.json` (a diffusers
// model's text_encoder/ or text_encoder_2/ folder), with transformers 4.3x's CLIPTextConfig
// defaults for keys that save_pretrained leaves out.
//
// Contract: ParseClipTextConfig refuses, by name, what the implementation does not have:
// model_type other than clip_text_model, architectures other than CLIPTextModel /
// CLIPTextModelWithProjection, hidden_act other than quick_gelu / gelu, attention_dropout != 0,
// hidden_size not divisible by num_attention_heads, sizes out of range. Unknown keys are ignored.
#pragma once

#include <cstdint>

#include "shared/json.h"
#include "shared/status.h"

namespace gleaner::train::text {

enum class ClipActivation {
  kQuickGelu,  // x * sigmoid(1.702 x): SD 1.x, SDXL text_encoder
  kGelu,       // exact erf GELU: SD 2.x, SDXL text_encoder_2
};

struct ClipTextConfig {
  int64_t vocab_size = 49408;
  int64_t hidden_size = 512;
  int64_t intermediate_size = 2048;
  int64_t num_hidden_layers = 12;
  int64_t num_attention_heads = 8;
  int64_t max_position_embeddings = 77;
  int64_t projection_dim = 512;  // used by CLIPTextModelWithProjection only
  double layer_norm_eps = 1e-5;
  ClipActivation hidden_act = ClipActivation::kQuickGelu;
  // Pooling: the first position holding eos_token_id; the legacy value 2 (configs written before
  // transformers 4.31) means the position of the largest id, as transformers keeps doing.
  int64_t eos_token_id = 49407;
  bool with_projection = false;  // architectures[0] == "CLIPTextModelWithProjection"
};

Result<ClipTextConfig> ParseClipTextConfig(const Json& config);
// Reads and parses a config.json file; errors are prefixed with its path.
Result<ClipTextConfig> LoadClipTextConfig(const std::string& path);

}  // namespace gleaner::train::text
