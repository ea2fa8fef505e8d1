// Storage quotas per lease (docs/architecture.md "Storage quotas"): what one lease may store.
//
// Every upload URL minted for a lease (checkpoint, output, sample image) is recorded in
// lease_objects (migration 0015) with the size it allows, in the same conditional statement that
// checks the lease's allowance, so "check, then mint" is one write (DESIGN §2.2):
//   outputs:     at most lease_max_outputs names and lease_max_output_bytes in all;
//   uncommitted: checkpoints and sample images not committed yet, at most
//                lease_max_uncommitted_bytes and kMaxUncommittedObjects objects.
// An object counts with its stored size once the built-in store holds it, else with what its
// URL allows. A URL for a declared size allows exactly that; without one it allows what remains
// (at most the per-object limit: max_checkpoint_bytes, max_output_bytes; a sample image at most
// what a PNG of the job's sample_resolution can take). Minting the same key again replaces its
// reservation (a retried upload), so it never counts twice.
//
// A commit removes the record of what it commits (checkpoints, samples); maintenance collects
// what stays uncommitted past uncommitted_grace_s (AddCollectUncommitted), in both storage
// modes; outputs of a lease still running stay (its holder may still commit them).
// Portable; pure functions building SQL, no I/O.
#pragma once

#include <cstdint>
#include <string>

#include "coordinator/core/context.h"
#include "coordinator/core/sql.h"

namespace gleaner::core {

constexpr int64_t kMaxUncommittedObjects = 64;

enum class LeaseObjectKind { kCheckpoint, kOutput, kSample };

struct LeaseObject {
  LeaseObjectKind kind = LeaseObjectKind::kCheckpoint;
  std::string key;
  int64_t epoch = 0;
  int64_t step = 0;       // checkpoint, sample
  int64_t index = 0;      // sample
  std::string name;       // output
  int64_t declared = -1;  // the size the node declared; < 0: none
};

// Adds the minting statement (RETURNING max_size; no row: refused, see ExplainQuota) and the
// usage read ExplainQuota needs, in this order, as statements `first` and `first + 1`.
void AddMint(const Ctx& ctx, const LeaseObject& o, Batch* b);

// Why a mint of `o` was refused when the lease itself holds (ExplainLease ok) and the step is
// acceptable: 413 quota_exceeded naming the limit, from the usage read of AddMint.
Plan RefuseQuota(const Ctx& ctx, const LeaseObject& o, const Rows& usage);

// The maintenance statements: the built-in store's rows of uncommitted objects minted before
// now - uncommitted_grace_s go (first statement), then their records (second, RETURNING key:
// the keys the shell deletes), then the records of committed outputs of ended leases (third).
void AddCollectUncommitted(const CoreConfig& config, int64_t now_ms, Batch* b);

}  // namespace gleaner::core
