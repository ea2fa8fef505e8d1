#include "agent/train/models/text/t5_config.h"

#include "shared/native/files.h"

namespace gleaner::train::text {

namespace {

bool ArchitectureIs(const Json& j, const char* name) {
  auto arch = j.find("architectures");
  return arch != j.end() && arch->is_array() && arch->size() == 1 && (*arch)[0].is_string() &&
         (*arch)[0].get_ref<const std::string&>() == name;
}

}  // namespace

bool IsT5Config(const Json& j) {
  if (!j.is_object()) return false;
  auto type = j.find("model_type");
  if (type != j.end() && type->is_string() && type->get_ref<const std::string&>() == "t5") {
    return true;
  }
  return ArchitectureIs(j, "T5EncoderModel");
}

Result<T5Config> ParseT5Config(const Json& j) {
  if (!j.is_object()) return Status::Invalid("config: not a JSON object");
  T5Config c;
  FieldReader r(j);
  // transformers' T5Config default is the original T5's "relu"; v1.1 (and FLUX) write gated-gelu.
  std::string model_type = "t5", ffn = "relu", act, dense_act;
  bool gated = true;
  r.String("model_type", &model_type, false);
  r.Int("vocab_size", &c.vocab_size, false, 1, int64_t(1) << 24);
  r.Int("d_model", &c.d_model, false, 1, 1 << 16);
  r.Int("d_kv", &c.d_kv, false, 1, 1 << 12);
  r.Int("d_ff", &c.d_ff, false, 1, 1 << 18);
  r.Int("num_layers", &c.num_layers, false, 1, 256);
  r.Int("num_heads", &c.num_heads, false, 1, 1024);
  r.Int("relative_attention_num_buckets", &c.relative_attention_num_buckets, false, 4, 1 << 16);
  r.Int("relative_attention_max_distance", &c.relative_attention_max_distance, false, 1, 1 << 24);
  r.Number("layer_norm_epsilon", &c.layer_norm_epsilon, false, 0, 1);
  r.Number("dropout_rate", &c.dropout_rate, false, 0, 1);
  r.Int("pad_token_id", &c.pad_token_id, false, 0, int64_t(1) << 24);
  r.Int("eos_token_id", &c.eos_token_id, false, 0, int64_t(1) << 24);
  r.String("feed_forward_proj", &ffn, false);
  r.String("dense_act_fn", &dense_act, false);
  r.Bool("is_gated_act", &gated, false);
  if (!r.ok()) return Status::Invalid("config: " + r.status().message());
  if (model_type != "t5") {
    return Status::Invalid("config: model_type \"" + model_type +
                           "\" is not supported (expected t5)");
  }
  auto arch = j.find("architectures");
  if (arch != j.end() && !arch->is_null()) {
    if (!arch->is_array() || arch->size() != 1 || !(*arch)[0].is_string()) {
      return Status::Invalid("config: architectures must be a list of one name");
    }
    const std::string& name = (*arch)[0].get_ref<const std::string&>();
    if (name != "T5EncoderModel") {
      return Status::Invalid("config: architecture \"" + name +
                             "\" is not supported (T5EncoderModel)");
    }
  }
  if (ffn != "gated-gelu") {
    return Status::Invalid("config: feed_forward_proj \"" + ffn +
                           "\" is not supported (gated-gelu, T5 v1.1)");
  }
  // Written by to_json_file next to feed_forward_proj; a loaded config keeps what it says.
  if (!dense_act.empty() && dense_act != "gelu_new") {
    return Status::Invalid("config: dense_act_fn \"" + dense_act +
                           "\" is not supported with gated-gelu (gelu_new)");
  }
  if (!gated) return Status::Invalid("config: is_gated_act must be true with gated-gelu");
  if (c.layer_norm_epsilon <= 0) {
    return Status::Invalid("config: layer_norm_epsilon must be greater than 0");
  }
  // The bidirectional bucket rule: half the buckets per direction, the first half of those exact
  // offsets, the rest log-spaced up to max_distance.
  const int64_t max_exact = c.relative_attention_num_buckets / 4;
  if (c.relative_attention_max_distance <= max_exact) {
    return Status::Invalid("config: relative_attention_max_distance must be greater than " +
                           std::to_string(max_exact) + " (relative_attention_num_buckets / 4)");
  }
  if (c.eos_token_id >= c.vocab_size || c.pad_token_id >= c.vocab_size) {
    return Status::Invalid("config: eos_token_id and pad_token_id must be below vocab_size");
  }
  return c;
}

Result<T5Config> LoadT5Config(const std::string& path) {
  Result<std::string> text = files::ReadAll(path, 1 << 20);
  if (!text.ok()) return text.status();
  Result<Json> j = ParseJson(*text);
  if (!j.ok()) return Status::Invalid(path + ": " + j.status().message());
  Result<T5Config> c = ParseT5Config(*j);
  if (!c.ok()) return Status::Invalid(path + ": " + c.status().message());
  return c;
}

Json T5ConfigToJson(const T5Config& c) {
  return Json{{"architectures", Json::array({"T5EncoderModel"})},
              {"model_type", "t5"},
              {"vocab_size", c.vocab_size},
              {"d_model", c.d_model},
              {"d_kv", c.d_kv},
              {"d_ff", c.d_ff},
              {"num_layers", c.num_layers},
              {"num_heads", c.num_heads},
              {"relative_attention_num_buckets", c.relative_attention_num_buckets},
              {"relative_attention_max_distance", c.relative_attention_max_distance},
              {"layer_norm_epsilon", c.layer_norm_epsilon},
              {"dropout_rate", c.dropout_rate},
              {"feed_forward_proj", "gated-gelu"},
              {"dense_act_fn", "gelu_new"},
              {"is_gated_act", true},
              {"pad_token_id", c.pad_token_id},
              {"eos_token_id", c.eos_token_id}};
}

}  // namespace gleaner::train::text
