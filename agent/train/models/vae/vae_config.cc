#include "agent/train/models/vae/vae_config.h"

#include "agent/train/nn/torch_io.h"

namespace gleaner::train::vae {
namespace {

// Fields that select features AutoencoderKL here does not have: absent, null or this value.
Status CheckUnsupported(const Json& j) {
  auto cls = j.find("_class_name");
  if (cls != j.end() && !cls->is_null() && *cls != "AutoencoderKL") {
    return Status::Invalid("vae config: _class_name " + DumpJson(*cls) +
                           " is not supported (only AutoencoderKL)");
  }
  auto act = j.find("act_fn");
  if (act != j.end() && !act->is_null() && *act != "silu" && *act != "swish") {
    return Status::Invalid("vae config: act_fn " + DumpJson(*act) +
                           " is not supported (only silu)");
  }
  for (const char* k : {"latents_mean", "latents_std"}) {
    auto it = j.find(k);
    if (it != j.end() && !it->is_null()) {
      return Status::Invalid(std::string("vae config: ") + k +
                             " is not supported (per-channel latent statistics; must be null)");
    }
  }
  return Status::Ok();
}

Status BlockTypes(const Json& j, const char* key, const char* want, size_t n) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (n == 1) return Status::Ok();  // the default is one block of that type
    return Status::Invalid(std::string("vae config: ") + key + " is required");
  }
  if (!it->is_array() || it->size() != n) {
    return Status::Invalid(std::string("vae config: ") + key +
                           " must list one block per block_out_channels entry");
  }
  for (const Json& v : *it) {
    if (v != want) {
      return Status::Invalid(std::string("vae config: ") + key + ": block " + DumpJson(v) +
                             " is not supported (only " + want + ")");
    }
  }
  return Status::Ok();
}

}  // namespace

Result<VaeConfig> ParseVaeConfig(const Json& j) {
  if (!j.is_object()) return Status::Invalid("vae config must be a JSON object");
  GLEANER_RETURN_IF_ERROR(CheckUnsupported(j));
  VaeConfig c;
  auto bo = j.find("block_out_channels");
  if (bo != j.end() && !bo->is_null()) {
    if (!bo->is_array() || bo->empty() || bo->size() > 8) {
      return Status::Invalid("vae config: block_out_channels must be a list of 1..8 integers");
    }
    c.block_out_channels.clear();
    for (const Json& v : *bo) {
      if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > 4096) {
        return Status::Invalid(
            "vae config: block_out_channels entries must be integers in [1, 4096]");
      }
      c.block_out_channels.push_back(int(v.get<int64_t>()));
    }
  }
  size_t n = c.block_out_channels.size();
  GLEANER_RETURN_IF_ERROR(BlockTypes(j, "down_block_types", "DownEncoderBlock2D", n));
  GLEANER_RETURN_IF_ERROR(BlockTypes(j, "up_block_types", "UpDecoderBlock2D", n));
  FieldReader r(j, "vae config: ");
  int64_t v = 0;
  auto read_int = [&](const char* key, int* out, int64_t lo, int64_t hi) {
    v = *out;
    r.Int(key, &v, false, lo, hi);
    *out = int(v);
  };
  read_int("in_channels", &c.in_channels, 1, 64);
  read_int("out_channels", &c.out_channels, 1, 64);
  read_int("layers_per_block", &c.layers_per_block, 1, 16);
  read_int("latent_channels", &c.latent_channels, 1, 256);
  read_int("norm_num_groups", &c.norm_num_groups, 1, 1024);
  r.Number("scaling_factor", &c.scaling_factor, false, 1e-6, 1e6);
  double shift = 0;
  if (r.Has("shift_factor") && r.Number("shift_factor", &shift, false, -1e6, 1e6)) {
    c.shift_factor = shift;
  }
  r.Bool("force_upcast", &c.force_upcast, false);
  r.Bool("use_quant_conv", &c.use_quant_conv, false);
  r.Bool("use_post_quant_conv", &c.use_post_quant_conv, false);
  r.Bool("mid_block_add_attention", &c.mid_block_add_attention, false);
  if (!r.ok()) return r.status();
  for (size_t i = 0; i < n; ++i) {
    if (c.block_out_channels[i] % c.norm_num_groups != 0) {
      return Status::Invalid("vae config: block_out_channels[" + std::to_string(i) +
                             "] must be a multiple of norm_num_groups");
    }
  }
  return c;
}

Result<VaeConfig> LoadVaeConfig(const std::string& path) {
  Result<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  Result<Json> j = ParseJson(*text);
  if (!j.ok()) return Status::Invalid(path + ": " + j.status().message());
  Result<VaeConfig> c = ParseVaeConfig(*j);
  if (!c.ok()) return Status::Invalid(path + ": " + c.status().message());
  return c;
}

}  // namespace gleaner::train::vae
