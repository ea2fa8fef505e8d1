#include "shared/unet_limits.h"

#include <cstdlib>
#include <cstring>

namespace gleaner {

const UnetConfigLimit kUnetConfigLimits[] = {
    {"block_out_channels", 1, 8192},
    {"layers_per_block", 1, 16},
    {"num_attention_heads", 1, 1024},
    {"attention_head_dim", 1, 1024},
    {"transformer_layers_per_block", 1, 64},
    {"reverse_transformer_layers_per_block", 1, 64},
    {"cross_attention_dim", 1, 8192},
    {"in_channels", 1, 64},
    {"out_channels", 1, 64},
    {"norm_num_groups", 1, 1024},
    {"addition_time_embed_dim", 1, 4096},
    {"projection_class_embeddings_input_dim", 1, 65536},
    {"sample_size", 1, 16384},
    {"downsample_padding", 0, 1},
};
const size_t kUnetConfigLimitCount = sizeof(kUnetConfigLimits) / sizeof(kUnetConfigLimits[0]);

const UnetConfigLimit& UnetLimit(const char* field) {
  for (size_t i = 0; i < kUnetConfigLimitCount; ++i) {
    if (std::strcmp(kUnetConfigLimits[i].field, field) == 0) return kUnetConfigLimits[i];
  }
  std::abort();
}

std::string UnetLimitMessage(const std::string& prefix, const UnetConfigLimit& limit, bool list) {
  return prefix + "." + limit.field + (list ? " entries must be integers" : " must be an integer") +
         " in [" + std::to_string(limit.min) + ", " + std::to_string(limit.max) + "]";
}

namespace {

// An integer in range, or a list of such (depth-limited: per-layer lists are two deep).
bool WithinLimit(const Json& v, const UnetConfigLimit& limit, int depth) {
  if (v.is_number_integer()) {
    int64_t x = v.get<int64_t>();
    return x >= limit.min && x <= limit.max;
  }
  if (!v.is_array() || depth >= 2) return false;
  for (const Json& e : v) {
    if (!WithinLimit(e, limit, depth + 1)) return false;
  }
  return true;
}

}  // namespace

Status CheckUnetConfigLimits(const Json& config, const std::string& prefix) {
  if (!config.is_object()) return Status::Invalid(prefix + " must be a JSON object");
  for (size_t i = 0; i < kUnetConfigLimitCount; ++i) {
    const UnetConfigLimit& limit = kUnetConfigLimits[i];
    auto it = config.find(limit.field);
    if (it == config.end() || it->is_null()) continue;
    if (!WithinLimit(*it, limit, 0)) {
      return Status::Invalid(UnetLimitMessage(prefix, limit, it->is_array()));
    }
  }
  auto bo = config.find("block_out_channels");
  if (bo != config.end() && bo->is_array() && bo->size() > kMaxUnetBlocks) {
    return Status::Invalid(prefix + ".block_out_channels must be a list of 1.." +
                           std::to_string(kMaxUnetBlocks) + " integers");
  }
  return Status::Ok();
}

}  // namespace gleaner
