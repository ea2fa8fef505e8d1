// The configuration of a T5 v1.1 encoder (transformers' T5Config, as FLUX.1's text_encoder_2/
// config.json writes it), with transformers' T5Config defaults for keys that are absent.
//
// Contract: ParseT5Config refuses, by name, what the encoder does not implement: a model_type
// other than t5, architectures other than T5EncoderModel, a feed-forward other than v1.1's
// gated-gelu (dense_act_fn gelu_new, is_gated_act true when written), bucket settings the
// relative-position rule cannot use, sizes out of range. Sizes are checked against ranges only;
// nothing is allocated here. dropout_rate is read but never applied (the encoder runs frozen, as
// eval()). Unknown keys (decoder settings, use_cache, ...) are ignored. Pure functions.
#pragma once

#include <cstdint>
#include <string>

#include "shared/json.h"
#include "shared/status.h"

namespace gleaner::train::text {

struct T5Config {
  int64_t vocab_size = 32128;
  int64_t d_model = 512;
  int64_t d_kv = 64;  // per head; inner = num_heads * d_kv may differ from d_model
  int64_t d_ff = 2048;
  int64_t num_layers = 6;
  int64_t num_heads = 8;
  int64_t relative_attention_num_buckets = 32;
  int64_t relative_attention_max_distance = 128;
  double layer_norm_epsilon = 1e-6;
  double dropout_rate = 0.1;  // read for completeness; not applied
  int64_t pad_token_id = 0;
  int64_t eos_token_id = 1;

  int64_t inner_dim() const { return num_heads * d_kv; }
};

// True when a config.json describes a T5 encoder (model_type "t5" or architectures
// ["T5EncoderModel"]): how `text-encode` and the model loaders tell T5 from CLIP.
bool IsT5Config(const Json& config);

Result<T5Config> ParseT5Config(const Json& config);
// Reads and parses a config.json file; errors are prefixed with its path.
Result<T5Config> LoadT5Config(const std::string& path);
Json T5ConfigToJson(const T5Config& config);

}  // namespace gleaner::train::text
