#include "agent/train/models/unet/unet_config.h"

#include "shared/unet_limits.h"

namespace gleaner::train::unet {
namespace {

// Every range below is the shared table of unet_limits.h, which the coordinator checks too.
int64_t Min(const char* field) {
  return UnetLimit(field).min;
}
int64_t Max(const char* field) {
  return UnetLimit(field).max;
}

// An int or a list of ints (one per down block).
bool IntOrList(const Json& j, const char* key, size_t n, std::vector<int>* out, Status* err, int lo,
               int hi) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    *err = Status::Invalid(std::string("config.") + key + " is required");
    return false;
  }
  out->clear();
  auto one = [&](const Json& v) {
    if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > hi) return false;
    out->push_back(int(v.get<int64_t>()));
    return true;
  };
  bool ok = true;
  if (it->is_array()) {
    if (it->size() != n) ok = false;
    for (const Json& v : *it) ok = ok && one(v);
  } else {
    ok = one(*it);
    if (ok) out->assign(n, out->front());
  }
  if (!ok) {
    *err = Status::Invalid(std::string("config.") + key + " must be an integer in [" +
                           std::to_string(lo) + ", " + std::to_string(hi) + "] or a list of " +
                           std::to_string(n) + " of them");
  }
  return ok;
}

bool StringList(const Json& j, const char* key, std::vector<std::string>* out, Status* err) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_array() || it->empty() || it->size() > 8) {
    *err = Status::Invalid(std::string("config.") + key + " must be a list of 1..8 block types");
    return false;
  }
  for (const Json& v : *it) {
    if (!v.is_string()) {
      *err = Status::Invalid(std::string("config.") + key + " must contain strings");
      return false;
    }
    out->push_back(v.get<std::string>());
  }
  return true;
}

// Fields that must be absent/null/default because they select features we do not implement.
Status CheckUnsupported(const Json& j) {
  const char* must_be_null[] = {
      "class_embed_type",   "encoder_hid_dim",       "encoder_hid_dim_type",
      "time_cond_proj_dim", "num_class_embeds",      "time_embedding_dim",
      "timestep_post_act",  "time_embedding_act_fn", "cross_attention_norm"};
  for (const char* k : must_be_null) {
    auto it = j.find(k);
    if (it != j.end() && !it->is_null()) {
      return Status::Invalid(std::string("config.") + k + " is not supported (must be null)");
    }
  }
  auto is = [&](const char* k, const Json& want) {
    auto it = j.find(k);
    return it == j.end() || it->is_null() || *it == want;
  };
  struct Want {
    const char* key;
    Json value;
  };
  const Want wants[] = {{"act_fn", "silu"},
                        {"time_embedding_type", "positional"},
                        {"resnet_time_scale_shift", "default"},
                        {"attention_type", "default"},
                        {"center_input_sample", false},
                        {"dual_cross_attention", false},
                        {"only_cross_attention", false},
                        {"mid_block_only_cross_attention", false},
                        {"class_embeddings_concat", false},
                        {"resnet_skip_time_act", false},
                        {"conv_in_kernel", 3},
                        {"conv_out_kernel", 3},
                        {"mid_block_type", "UNetMidBlock2DCrossAttn"}};
  for (const Want& w : wants) {
    if (!is(w.key, w.value)) {
      return Status::Invalid(std::string("config.") + w.key + " must be " + DumpJson(w.value));
    }
  }
  auto mid = j.find("mid_block_type");
  if (mid != j.end() && mid->is_null()) {
    return Status::Invalid(
        "config.mid_block_type null (a UNet without mid block) is not supported");
  }
  auto f = j.find("resnet_out_scale_factor");
  if (f != j.end() && !f->is_null() && !(f->is_number() && f->get<double>() == 1.0)) {
    return Status::Invalid("config.resnet_out_scale_factor must be 1.0");
  }
  f = j.find("dropout");
  if (f != j.end() && !f->is_null() && !(f->is_number() && f->get<double>() == 0.0)) {
    return Status::Invalid("config.dropout must be 0");
  }
  return Status::Ok();
}

// One block's entry of (reverse_)transformer_layers_per_block: an int for every layer of the
// block, or a list with one int per layer (`layers` of them; any length when the block has no
// attention, where diffusers ignores it).
bool LayersEntry(const Json& v, int layers, bool attn, std::vector<int>* out) {
  auto valid = [](const Json& x) {
    return x.is_number_integer() && x.get<int64_t>() >= 1 &&
           x.get<int64_t>() <= Max("transformer_layers_per_block");
  };
  out->clear();
  if (valid(v)) {
    out->assign(size_t(layers), int(v.get<int64_t>()));
    return true;
  }
  if (!v.is_array() || v.empty() || (attn && v.size() != size_t(layers))) return false;
  for (const Json& x : v) {
    if (!valid(x)) return false;
    out->push_back(int(x.get<int64_t>()));
  }
  out->resize(size_t(layers), out->back());
  return true;
}

// transformer_layers_per_block (int, per-block list, or per-block list of per-layer lists) and
// reverse_transformer_layers_per_block (per up block; diffusers requires it with per-layer lists
// and otherwise uses the reversed per-block list).
Status ParseTransformerLayers(const Json& j, UNetConfig* c) {
  const size_t n = c->block_out_channels.size();
  const std::string range = "[" + std::to_string(Min("transformer_layers_per_block")) + ", " +
                            std::to_string(Max("transformer_layers_per_block")) + "]";
  auto t = j.find("transformer_layers_per_block");
  Json per_block = Json::array();
  if (t == j.end() || t->is_null()) {
    per_block = Json(std::vector<int>(n, 1));
  } else if (t->is_array()) {
    if (t->size() != n) {
      return Status::Invalid("config.transformer_layers_per_block must have one entry per block");
    }
    per_block = *t;
  } else {
    per_block = Json(std::vector<Json>(n, *t));
  }
  bool nested = false;
  c->down_transformer_layers.assign(n, {});
  for (size_t i = 0; i < n; ++i) {
    nested = nested || per_block[i].is_array();
    bool attn = c->down_block_types[i] == "CrossAttnDownBlock2D";
    if (!LayersEntry(per_block[i], c->layers_per_block[i], attn, &c->down_transformer_layers[i])) {
      return Status::Invalid("config.transformer_layers_per_block[" + std::to_string(i) +
                             "] must be an integer in " + range + " or a list of " +
                             std::to_string(c->layers_per_block[i]) + " of them");
    }
  }
  auto r = j.find("reverse_transformer_layers_per_block");
  bool have_reverse = r != j.end() && !r->is_null();
  if (nested && !have_reverse) {
    return Status::Invalid(
        "config.reverse_transformer_layers_per_block is required when "
        "transformer_layers_per_block has per-layer lists");
  }
  if (have_reverse && (!r->is_array() || r->size() != n)) {
    return Status::Invalid(
        "config.reverse_transformer_layers_per_block must have one entry per block");
  }
  c->up_transformer_layers.assign(n, {});
  for (size_t i = 0; i < n; ++i) {
    int layers = c->layers_per_block[n - 1 - i] + 1;
    bool attn = c->up_block_types[i] == "CrossAttnUpBlock2D";
    const Json& entry = have_reverse ? (*r)[i] : per_block[n - 1 - i];
    if (!LayersEntry(entry, layers, attn, &c->up_transformer_layers[i])) {
      return Status::Invalid("config.reverse_transformer_layers_per_block[" + std::to_string(i) +
                             "] must be an integer in " + range + " or a list of " +
                             std::to_string(layers) + " of them");
    }
  }
  return Status::Ok();
}

// addition_embed_type: null, or "text_time" (SDXL) with its two dimensions.
Status ParseAdditionEmbedding(const Json& j, UNetConfig* c) {
  auto t = j.find("addition_embed_type");
  if (t == j.end() || t->is_null()) return Status::Ok();
  if (*t != "text_time") {
    return Status::Invalid("config.addition_embed_type " + DumpJson(*t) +
                           " is not supported (only null or \"text_time\", as SDXL)");
  }
  c->addition_embed_type = "text_time";
  FieldReader r(j, "config.");
  int64_t atd = 0, pcid = 0;
  r.Int("addition_time_embed_dim", &atd, true, Min("addition_time_embed_dim"),
        Max("addition_time_embed_dim"));
  r.Int("projection_class_embeddings_input_dim", &pcid, true,
        Min("projection_class_embeddings_input_dim"), Max("projection_class_embeddings_input_dim"));
  if (!r.ok()) return r.status();
  if (pcid <= 6 * atd) {
    return Status::Invalid(
        "config.projection_class_embeddings_input_dim must exceed 6 * addition_time_embed_dim (" +
        std::to_string(6 * atd) + "): it is the pooled text embedding size plus that");
  }
  c->addition_time_embed_dim = int(atd);
  c->projection_class_embeddings_input_dim = int(pcid);
  return Status::Ok();
}

// sample_size: an int or [height, width] (diffusers allows both).
Status ParseSampleSize(const Json& j, UNetConfig* c) {
  auto s = j.find("sample_size");
  if (s == j.end() || s->is_null()) return Status::Ok();
  auto valid = [](const Json& v) {
    return v.is_number_integer() && v.get<int64_t>() >= Min("sample_size") &&
           v.get<int64_t>() <= Max("sample_size");
  };
  if (valid(*s)) {
    c->sample_size = {int(s->get<int64_t>())};
  } else if (s->is_array() && s->size() == 2 && valid((*s)[0]) && valid((*s)[1])) {
    c->sample_size = {int((*s)[0].get<int64_t>()), int((*s)[1].get<int64_t>())};
  } else {
    return Status::Invalid("config.sample_size must be an integer or [height, width]");
  }
  return Status::Ok();
}

// Heads must divide the channels of every block that has attention; groups every block.
Status CheckDivisibility(const UNetConfig& c) {
  const size_t n = c.block_out_channels.size();
  for (size_t i = 0; i < n; ++i) {
    int ch = c.block_out_channels[i];
    if (ch % c.norm_num_groups != 0) {
      return Status::Invalid("config.block_out_channels[" + std::to_string(i) +
                             "] must be a multiple of norm_num_groups");
    }
    bool attn = c.down_block_types[i] == "CrossAttnDownBlock2D" ||
                c.up_block_types[n - 1 - i] == "CrossAttnUpBlock2D" || i == n - 1;
    if (attn && ch % c.num_heads[i] != 0) {
      return Status::Invalid("config: block_out_channels[" + std::to_string(i) +
                             "] must be divisible by its number of attention heads");
    }
  }
  return Status::Ok();
}

// Per-block layer lists as diffusers writes them: an int when every layer has the same count.
Json LayersJson(const std::vector<std::vector<int>>& blocks) {
  Json out = Json::array();
  for (const std::vector<int>& b : blocks) {
    bool uniform = true;
    for (int v : b) uniform = uniform && v == b.front();
    out.push_back(uniform ? Json(b.front()) : Json(b));
  }
  return out;
}

}  // namespace

Result<UNetConfig> ParseUNetConfig(const Json& j) {
  if (!j.is_object()) return Status::Invalid("config must be a JSON object");
  GLEANER_RETURN_IF_ERROR(CheckUnsupported(j));
  UNetConfig c;
  Status err;
  auto bo = j.find("block_out_channels");
  if (bo == j.end() || !bo->is_array() || bo->empty() || bo->size() > kMaxUnetBlocks) {
    return Status::Invalid("config.block_out_channels must be a list of 1.." +
                           std::to_string(kMaxUnetBlocks) + " integers");
  }
  const UnetConfigLimit& channels = UnetLimit("block_out_channels");
  for (const Json& v : *bo) {
    if (!v.is_number_integer() || v.get<int64_t>() < channels.min ||
        v.get<int64_t>() > channels.max) {
      return Status::Invalid(UnetLimitMessage("config", channels, true));
    }
    c.block_out_channels.push_back(int(v.get<int64_t>()));
  }
  size_t n = c.block_out_channels.size();
  if (!StringList(j, "down_block_types", &c.down_block_types, &err)) return err;
  if (!StringList(j, "up_block_types", &c.up_block_types, &err)) return err;
  if (c.down_block_types.size() != n || c.up_block_types.size() != n) {
    return Status::Invalid(
        "config.down_block_types/up_block_types must have one entry per "
        "block_out_channels entry");
  }
  for (const std::string& t : c.down_block_types) {
    if (t != "CrossAttnDownBlock2D" && t != "DownBlock2D") {
      return Status::Invalid("config.down_block_types: unsupported block " + t);
    }
  }
  for (const std::string& t : c.up_block_types) {
    if (t != "CrossAttnUpBlock2D" && t != "UpBlock2D") {
      return Status::Invalid("config.up_block_types: unsupported block " + t);
    }
  }
  if (!IntOrList(j, "layers_per_block", n, &c.layers_per_block, &err, int(Min("layers_per_block")),
                 int(Max("layers_per_block")))) {
    return err;
  }
  auto nah = j.find("num_attention_heads");
  const char* heads_key =
      nah != j.end() && !nah->is_null() ? "num_attention_heads" : "attention_head_dim";
  if (!IntOrList(j, heads_key, n, &c.num_heads, &err, int(Min(heads_key)), int(Max(heads_key)))) {
    return err;
  }
  GLEANER_RETURN_IF_ERROR(ParseTransformerLayers(j, &c));
  GLEANER_RETURN_IF_ERROR(ParseAdditionEmbedding(j, &c));
  GLEANER_RETURN_IF_ERROR(ParseSampleSize(j, &c));
  FieldReader r(j, "config.");
  int64_t v = 0;
  double d = 0;
  v = 4;
  r.Int("in_channels", &v, false, Min("in_channels"), Max("in_channels"));
  c.in_channels = int(v);
  v = 4;
  r.Int("out_channels", &v, false, Min("out_channels"), Max("out_channels"));
  c.out_channels = int(v);
  v = 768;
  r.Int("cross_attention_dim", &v, true, Min("cross_attention_dim"), Max("cross_attention_dim"));
  c.cross_attention_dim = int(v);
  v = 32;
  r.Int("norm_num_groups", &v, false, Min("norm_num_groups"), Max("norm_num_groups"));
  c.norm_num_groups = int(v);
  d = 1e-5;
  r.Number("norm_eps", &d, false, 1e-12, 1);
  c.norm_eps = d;
  r.Bool("use_linear_projection", &c.use_linear_projection, false);
  r.Bool("flip_sin_to_cos", &c.flip_sin_to_cos, false);
  r.Bool("upcast_attention", &c.upcast_attention, false);
  d = 0;
  r.Number("freq_shift", &d, false, -1000, 1000);
  c.freq_shift = d;
  v = 1;
  r.Int("downsample_padding", &v, false, Min("downsample_padding"), Max("downsample_padding"));
  c.downsample_padding = int(v);
  d = 1;
  r.Number("mid_block_scale_factor", &d, false, 1e-6, 1e6);
  c.mid_block_scale_factor = d;
  if (!r.ok()) return r.status();
  GLEANER_RETURN_IF_ERROR(CheckDivisibility(c));
  return c;
}

Json UNetConfigToJson(const UNetConfig& c) {
  Json j = {
      {"_class_name", "UNet2DConditionModel"},
      {"in_channels", c.in_channels},
      {"out_channels", c.out_channels},
      {"block_out_channels", c.block_out_channels},
      {"down_block_types", c.down_block_types},
      {"up_block_types", c.up_block_types},
      {"layers_per_block", c.layers_per_block},
      {"attention_head_dim", c.num_heads},
      {"transformer_layers_per_block", LayersJson(c.down_transformer_layers)},
      {"cross_attention_dim", c.cross_attention_dim},
      {"norm_num_groups", c.norm_num_groups},
      {"norm_eps", c.norm_eps},
      {"use_linear_projection", c.use_linear_projection},
      {"flip_sin_to_cos", c.flip_sin_to_cos},
      {"freq_shift", c.freq_shift},
      {"downsample_padding", c.downsample_padding},
      {"mid_block_scale_factor", c.mid_block_scale_factor},
      {"upcast_attention", c.upcast_attention},
      {"sample_size", c.sample_size.size() == 1 ? Json(c.sample_size[0]) : Json(c.sample_size)}};
  // The reverse list only when the up blocks do not simply mirror the down blocks.
  Json down = j["transformer_layers_per_block"], up = LayersJson(c.up_transformer_layers);
  bool mirrored = true;
  for (size_t i = 0; i < up.size(); ++i) {
    mirrored =
        mirrored && down[down.size() - 1 - i].is_number() && up[i] == down[down.size() - 1 - i];
  }
  if (!mirrored) j["reverse_transformer_layers_per_block"] = up;
  if (c.has_text_time()) {
    j["addition_embed_type"] = c.addition_embed_type;
    j["addition_time_embed_dim"] = c.addition_time_embed_dim;
    j["projection_class_embeddings_input_dim"] = c.projection_class_embeddings_input_dim;
  }
  return j;
}

DenoiserShape ShapeOf(const UNetConfig& c) {
  DenoiserShape d;
  d.latent_channels = c.in_channels;
  d.context_dim = c.cross_attention_dim;
  d.pooled_dim = c.pooled_dim();
  d.time_ids = c.has_text_time();
  if (!c.sample_size.empty()) {
    d.sample_height = c.sample_size.front();
    d.sample_width = c.sample_size.back();
  }
  return d;
}

}  // namespace gleaner::train::unet
