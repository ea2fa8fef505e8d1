#include "agent/train/models/text/clip_text_config.h"

#include "shared/native/files.h"

namespace gleaner::train::text {

Result<ClipTextConfig> ParseClipTextConfig(const Json& j) {
  if (!j.is_object()) return Status::Invalid("config: not a JSON object");
  ClipTextConfig c;
  FieldReader r(j);
  std::string model_type = "clip_text_model", act = "quick_gelu";
  double dropout = 0;
  r.String("model_type", &model_type, false);
  r.Int("vocab_size", &c.vocab_size, false, 1, int64_t(1) << 24);
  r.Int("hidden_size", &c.hidden_size, false, 1, 1 << 16);
  r.Int("intermediate_size", &c.intermediate_size, false, 1, 1 << 18);
  r.Int("num_hidden_layers", &c.num_hidden_layers, false, 1, 256);
  r.Int("num_attention_heads", &c.num_attention_heads, false, 1, 1024);
  r.Int("max_position_embeddings", &c.max_position_embeddings, false, 1, 1 << 16);
  r.Int("projection_dim", &c.projection_dim, false, 1, 1 << 16);
  r.Number("layer_norm_eps", &c.layer_norm_eps, false, 0, 1);
  r.Number("attention_dropout", &dropout, false, 0, 1);
  r.String("hidden_act", &act, false);
  if (auto eos = j.find("eos_token_id"); eos != j.end() && !eos->is_null()) {
    r.Int("eos_token_id", &c.eos_token_id, false, 0, int64_t(1) << 24);
  }
  if (!r.ok()) return Status::Invalid("config: " + r.status().message());
  if (model_type != "clip_text_model") {
    return Status::Invalid("config: model_type \"" + model_type +
                           "\" is not supported (expected clip_text_model)");
  }
  auto arch = j.find("architectures");
  if (arch != j.end() && !arch->is_null()) {
    if (!arch->is_array() || arch->size() != 1 || !(*arch)[0].is_string()) {
      return Status::Invalid("config: architectures must be a list of one name");
    }
    const std::string& name = (*arch)[0].get_ref<const std::string&>();
    if (name != "CLIPTextModel" && name != "CLIPTextModelWithProjection") {
      return Status::Invalid("config: architecture \"" + name +
                             "\" is not supported (CLIPTextModel, CLIPTextModelWithProjection)");
    }
    c.with_projection = name == "CLIPTextModelWithProjection";
  }
  if (act == "quick_gelu") {
    c.hidden_act = ClipActivation::kQuickGelu;
  } else if (act == "gelu") {
    c.hidden_act = ClipActivation::kGelu;
  } else {
    return Status::Invalid("config: hidden_act \"" + act +
                           "\" is not supported (quick_gelu, gelu)");
  }
  if (dropout != 0) return Status::Invalid("config: attention_dropout must be 0");
  if (c.hidden_size % c.num_attention_heads != 0) {
    return Status::Invalid("config: hidden_size must be a multiple of num_attention_heads");
  }
  return c;
}

Result<ClipTextConfig> LoadClipTextConfig(const std::string& path) {
  Result<std::string> text = files::ReadAll(path, 1 << 20);
  if (!text.ok()) return text.status();
  Result<Json> j = ParseJson(*text);
  if (!j.ok()) return Status::Invalid(path + ": " + j.status().message());
  Result<ClipTextConfig> c = ParseClipTextConfig(*j);
  if (!c.ok()) return Status::Invalid(path + ": " + c.status().message());
  return c;
}

}  // namespace gleaner::train::text
