// The limits of a diffusers UNet2DConditionModel config that the trainer accepts: ONE table,
// read by the trainer (agent/train/models/unet/unet_config.cc, which validates the config fully)
// and by the coordinator at submission (CheckUnetConfig in job_params.h), so a config the
// coordinator accepts is never refused by the trainer for a value out of range.
//
// Contract: every row names a config field whose value is an integer or a list (lists of lists
// for per-layer fields) of integers, each within [min, max]. CheckUnetConfigLimits checks the
// fields that are present (null = absent; whether a field is required is the trainer's
// business) and block_out_channels' length; its errors are InvalidArgument naming the field
// and the limit ("model.config.block_out_channels entries must be integers in [1, 8192]").
// Portable (no exceptions, no I/O). Thread-safe (constant data, pure functions).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "shared/json.h"
#include "shared/status.h"

namespace gleaner {

struct UnetConfigLimit {
  const char* field;
  int64_t min;
  int64_t max;
};

// The number of down (and up) blocks: block_out_channels has 1..kMaxUnetBlocks entries.
constexpr size_t kMaxUnetBlocks = 8;

// The table, and its number of rows.
extern const UnetConfigLimit kUnetConfigLimits[];
extern const size_t kUnetConfigLimitCount;

// The row of `field`; a field not in the table is a programming error (aborts).
const UnetConfigLimit& UnetLimit(const char* field);

// "<prefix>.<field> entries must be integers in [min, max]" (or "must be an integer in ..."
// when list is false): the one wording both sides use.
std::string UnetLimitMessage(const std::string& prefix, const UnetConfigLimit& limit, bool list);

// Checks every field of the table present in `config` (an object), as described above. prefix
// names the config in messages ("model.config").
Status CheckUnetConfigLimits(const Json& config, const std::string& prefix);

}  // namespace gleaner
