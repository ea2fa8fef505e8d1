#include "agent/train/models/flux/flux_config.h"

#include <string>

namespace gleaner::train::flux {
namespace {

// An integer field in [lo, hi]; absent or null keeps *out (the default).
Status Int(const Json& j, const char* key, int lo, int hi, int* out, bool null_ok = true) {
  auto it = j.find(key);
  if (it == j.end() || (null_ok && it->is_null())) return Status::Ok();
  if (!it->is_number_integer() || it->get<int64_t>() < lo || it->get<int64_t>() > hi) {
    return Status::Invalid(std::string("config.") + key + " must be an integer in [" +
                           std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  *out = int(it->get<int64_t>());
  return Status::Ok();
}

}  // namespace

bool IsFluxConfig(const Json& j) {
  auto it = j.find("_class_name");
  return j.is_object() && it != j.end() && it->is_string() &&
         it->get<std::string>() == "FluxTransformer2DModel";
}

Result<FluxConfig> ParseFluxConfig(const Json& j) {
  if (!j.is_object()) return Status::Invalid("config must be a JSON object");
  auto cls = j.find("_class_name");
  if (cls != j.end() &&
      !(cls->is_string() && cls->get<std::string>() == "FluxTransformer2DModel")) {
    return Status::Invalid("config._class_name must be FluxTransformer2DModel");
  }
  FluxConfig c;
  GLEANER_RETURN_IF_ERROR(Int(j, "patch_size", 1, 1, &c.patch_size));
  GLEANER_RETURN_IF_ERROR(Int(j, "in_channels", 1, 65536, &c.in_channels));
  c.out_channels = 0;
  GLEANER_RETURN_IF_ERROR(Int(j, "out_channels", 1, 65536, &c.out_channels));
  if (c.out_channels == 0) c.out_channels = c.in_channels;
  GLEANER_RETURN_IF_ERROR(Int(j, "num_layers", 0, 1024, &c.num_layers));
  GLEANER_RETURN_IF_ERROR(Int(j, "num_single_layers", 0, 1024, &c.num_single_layers));
  GLEANER_RETURN_IF_ERROR(Int(j, "attention_head_dim", 2, 4096, &c.attention_head_dim));
  GLEANER_RETURN_IF_ERROR(Int(j, "num_attention_heads", 1, 1024, &c.num_attention_heads));
  GLEANER_RETURN_IF_ERROR(Int(j, "joint_attention_dim", 1, 65536, &c.joint_attention_dim));
  GLEANER_RETURN_IF_ERROR(Int(j, "pooled_projection_dim", 1, 65536, &c.pooled_projection_dim));
  if (c.attention_head_dim % 2 != 0) {
    return Status::Invalid("config.attention_head_dim must be even (RoPE pairs)");
  }
  if (c.inner_dim() > 65536) {
    return Status::Invalid("config.num_attention_heads * attention_head_dim must be <= 65536");
  }
  auto g = j.find("guidance_embeds");
  if (g != j.end() && !g->is_null()) {
    if (!g->is_boolean()) return Status::Invalid("config.guidance_embeds must be true or false");
    c.guidance_embeds = g->get<bool>();
  }
  auto axes = j.find("axes_dims_rope");
  if (axes != j.end() && !axes->is_null()) {
    if (!axes->is_array() || axes->size() != 3) {
      return Status::Invalid("config.axes_dims_rope must be a list of 3 even integers");
    }
    c.axes_dims_rope.clear();
    for (const Json& v : *axes) {
      if (!v.is_number_integer() || v.get<int64_t>() < 2 || v.get<int64_t>() > 4096 ||
          v.get<int64_t>() % 2 != 0) {
        return Status::Invalid("config.axes_dims_rope must be a list of 3 even integers");
      }
      c.axes_dims_rope.push_back(int(v.get<int64_t>()));
    }
  }
  int sum = 0;
  for (int a : c.axes_dims_rope) sum += a;
  if (sum != c.attention_head_dim) {
    return Status::Invalid("config.axes_dims_rope must add up to attention_head_dim (" +
                           std::to_string(c.attention_head_dim) + ")");
  }
  return c;
}

Json FluxConfigToJson(const FluxConfig& c) {
  Json j = Json::object();
  j["_class_name"] = "FluxTransformer2DModel";
  j["patch_size"] = c.patch_size;
  j["in_channels"] = c.in_channels;
  j["out_channels"] = c.out_channels;
  j["num_layers"] = c.num_layers;
  j["num_single_layers"] = c.num_single_layers;
  j["attention_head_dim"] = c.attention_head_dim;
  j["num_attention_heads"] = c.num_attention_heads;
  j["joint_attention_dim"] = c.joint_attention_dim;
  j["pooled_projection_dim"] = c.pooled_projection_dim;
  j["guidance_embeds"] = c.guidance_embeds;
  j["axes_dims_rope"] = c.axes_dims_rope;
  return j;
}

FluxConfig TinyFluxConfig() {
  FluxConfig c;
  c.in_channels = c.out_channels = 16;
  c.num_layers = 2;
  c.num_single_layers = 2;
  c.attention_head_dim = 16;
  c.num_attention_heads = 2;
  c.joint_attention_dim = 32;
  c.pooled_projection_dim = 24;
  c.guidance_embeds = true;
  c.axes_dims_rope = {4, 4, 8};
  return c;
}

}  // namespace gleaner::train::flux
