#include "agent/train/lora_sd/unet_config.h"

namespace gleaner::train::lora_sd {
namespace {

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
  const char* must_be_null[] = {"class_embed_type",      "addition_embed_type",
                                "encoder_hid_dim",       "encoder_hid_dim_type",
                                "time_cond_proj_dim",    "num_class_embeds",
                                "time_embedding_dim",    "timestep_post_act",
                                "time_embedding_act_fn", "projection_class_embeddings_input_dim",
                                "cross_attention_norm",  "reverse_transformer_layers_per_block"};
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

}  // namespace

Result<UNetConfig> ParseUNetConfig(const Json& j) {
  if (!j.is_object()) return Status::Invalid("config must be a JSON object");
  GLEANER_RETURN_IF_ERROR(CheckUnsupported(j));
  UNetConfig c;
  Status err;
  auto bo = j.find("block_out_channels");
  if (bo == j.end() || !bo->is_array() || bo->empty() || bo->size() > 8) {
    return Status::Invalid("config.block_out_channels must be a list of 1..8 integers");
  }
  for (const Json& v : *bo) {
    if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > 8192) {
      return Status::Invalid("config.block_out_channels entries must be integers in [1, 8192]");
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
  if (!IntOrList(j, "layers_per_block", n, &c.layers_per_block, &err, 1, 16)) return err;
  auto nah = j.find("num_attention_heads");
  const char* heads_key =
      nah != j.end() && !nah->is_null() ? "num_attention_heads" : "attention_head_dim";
  if (!IntOrList(j, heads_key, n, &c.num_heads, &err, 1, 1024)) return err;
  if (!IntOrList(j, "transformer_layers_per_block", n, &c.transformer_layers, &err, 1, 16)) {
    return err;
  }
  FieldReader r(j, "config.");
  int64_t v = 0;
  double d = 0;
  v = 4;
  r.Int("in_channels", &v, false, 1, 64);
  c.in_channels = int(v);
  v = 4;
  r.Int("out_channels", &v, false, 1, 64);
  c.out_channels = int(v);
  v = 768;
  r.Int("cross_attention_dim", &v, true, 1, 8192);
  c.cross_attention_dim = int(v);
  v = 32;
  r.Int("norm_num_groups", &v, false, 1, 1024);
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
  r.Int("downsample_padding", &v, false, 0, 1);
  c.downsample_padding = int(v);
  d = 1;
  r.Number("mid_block_scale_factor", &d, false, 1e-6, 1e6);
  c.mid_block_scale_factor = d;
  v = 64;
  r.Int("sample_size", &v, false, 1, 1024);
  c.sample_size = int(v);
  if (!r.ok()) return r.status();
  for (size_t i = 0; i < n; ++i) {
    int ch = c.block_out_channels[i];
    if (ch % c.norm_num_groups != 0) {
      return Status::Invalid("config.block_out_channels[" + std::to_string(i) +
                             "] must be a multiple of norm_num_groups");
    }
    if (ch % c.num_heads[i] != 0 || ch % c.num_heads[n - 1 - i] != 0) {
      return Status::Invalid("config: block_out_channels[" + std::to_string(i) +
                             "] must be divisible by its number of attention heads");
    }
  }
  return c;
}

UNetConfig Sd15Config() {
  UNetConfig c;
  c.block_out_channels = {320, 640, 1280, 1280};
  c.down_block_types = {"CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D",
                        "DownBlock2D"};
  c.up_block_types = {"UpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D",
                      "CrossAttnUpBlock2D"};
  c.layers_per_block = {2, 2, 2, 2};
  c.num_heads = {8, 8, 8, 8};
  c.transformer_layers = {1, 1, 1, 1};
  c.cross_attention_dim = 768;
  c.norm_num_groups = 32;
  c.sample_size = 64;
  return c;
}

UNetConfig TinyConfig() {
  UNetConfig c;
  c.block_out_channels = {32, 64};
  c.down_block_types = {"CrossAttnDownBlock2D", "DownBlock2D"};
  c.up_block_types = {"UpBlock2D", "CrossAttnUpBlock2D"};
  c.layers_per_block = {1, 1};
  c.num_heads = {4, 4};
  c.transformer_layers = {1, 1};
  c.cross_attention_dim = 32;
  c.norm_num_groups = 8;
  c.sample_size = 16;
  return c;
}

Json UNetConfigToJson(const UNetConfig& c) {
  return Json{{"_class_name", "UNet2DConditionModel"},
              {"in_channels", c.in_channels},
              {"out_channels", c.out_channels},
              {"block_out_channels", c.block_out_channels},
              {"down_block_types", c.down_block_types},
              {"up_block_types", c.up_block_types},
              {"layers_per_block", c.layers_per_block},
              {"attention_head_dim", c.num_heads},
              {"transformer_layers_per_block", c.transformer_layers},
              {"cross_attention_dim", c.cross_attention_dim},
              {"norm_num_groups", c.norm_num_groups},
              {"norm_eps", c.norm_eps},
              {"use_linear_projection", c.use_linear_projection},
              {"flip_sin_to_cos", c.flip_sin_to_cos},
              {"freq_shift", c.freq_shift},
              {"downsample_padding", c.downsample_padding},
              {"mid_block_scale_factor", c.mid_block_scale_factor},
              {"upcast_attention", c.upcast_attention},
              {"sample_size", c.sample_size}};
}

}  // namespace gleaner::train::lora_sd
