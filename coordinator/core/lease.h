// Shared pieces of the node's lease routes (routes_lease.cc, routes_finish.cc).
#pragma once

#include <string>

#include "coordinator/core/context.h"

namespace gleaner::core {

// "SELECT <kLeaseColumns> FROM jobs WHERE id = ?" explains a fenced write that changed nothing.
extern const char* const kLeaseColumns;

// Why the lease fence (LeaseFence) does not hold for this caller and epoch, judged from a row
// selected with kLeaseColumns: NotFound (no such job) or Conflict naming the reason. Ok if held.
Status ExplainLease(const Rows& job, const Ctx& ctx, int64_t epoch);

// Reads the required "epoch" field (1..2^53-1) of a node write's body.
bool ReadEpoch(FieldReader& r, int64_t* epoch);

// Object keys. Checkpoints: jobs/<id>/ckpt/e<epoch>/s<step, 10 digits>;
// outputs: jobs/<id>/out/e<epoch>/<name>.
std::string CheckpointKey(const std::string& job, int64_t epoch, int64_t step);
std::string OutputKey(const std::string& job, int64_t epoch, const std::string& name);

}  // namespace gleaner::core
