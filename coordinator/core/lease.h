// The lease fence, and why it did not hold: one home for the rule every node write obeys
// (DESIGN §2.2-2.3). Used by the lease holder's routes: routes_lease.cc (heartbeat, checkpoints,
// output URLs), routes_finish.cc (complete, fail, release), routes_work.cc (fresh downloads).
//
// A node may write to a job only while it holds the job's lease: the job is running under the
// caller's epoch, assigned to the caller, and the lease has not expired (an expired lease is
// lost even before another node claims the job). The fence is SQL, never a read-then-decide in
// C++: a guarded write is one conditional statement, and its side effects (segment, node
// counters, bans, quarantine) come first in the same batch, each guarded by EXISTS (fence),
// with the job's own state change last. Zero rows changed means the fence did not hold: the
// continuation reads the job with kLeaseColumns and ExplainLease turns it into the 404 / 409
// the agent sees (and stops on).
#pragma once

#include <string>
#include <vector>

#include "coordinator/core/context.h"

namespace gleaner::core {

// The fence for the job in ctx.args[0], the caller's node and epoch, at ctx.now(). Use as
// "WHERE <sql>" on jobs or inside "EXISTS (SELECT 1 FROM jobs WHERE <sql>)".
struct Fence {
  std::string sql;
  std::vector<SqlValue> params;
};
Fence LeaseFence(const Ctx& ctx, int64_t epoch);

// Five statements that end the lease fenced by `f` (job ctx.args[0], the caller's node) as a
// failure of its node, each guarded by the fence, the job's change last: the node is banned
// from the job; the lease's segment ends at `ended_at_sql` (an SQL expression with its params)
// with `end_reason` and `reason` as its
// note; the node's jobs_failed count; the quarantine rule (quarantine_failures bans within
// quarantine_window_s; RETURNING id when it quarantined the node); the job goes back to
// pending, or fails after max_failures (RETURNING state, failures). Used by /fail and by the
// progress watchdog (a heartbeat without progress).
void AddLeaseFailure(const Ctx& ctx, const Fence& f, int64_t epoch, const std::string& reason,
                     const std::string& end_reason, const std::string& ended_at_sql,
                     const std::vector<SqlValue>& ended_at_params, Batch* b);

// "SELECT <kLeaseColumns> FROM jobs WHERE id = ?" explains a fenced write that changed nothing.
extern const char* const kLeaseColumns;

// Why the fence does not hold for this caller and epoch, judged from a row selected with
// kLeaseColumns: NotFound (no such job) or Conflict naming the reason. Ok if it holds.
Status ExplainLease(const Rows& job, const Ctx& ctx, int64_t epoch);

// Reads the required "epoch" field (1..2^53-1) of a node write's body.
bool ReadEpoch(FieldReader& r, int64_t* epoch);
// A body that is {"epoch"} and nothing else.
Status ReadEpochOnly(const Json& body, int64_t* epoch);

// The caller held the lease of this row (kLeaseColumns, or the same columns of a verification)
// under this epoch, whatever its state now: a canceled job or a voided verification answers its
// former holder's heartbeat with RespondLeaseCanceled() rather than 409.
bool HeldBy(const Rows& row, const Ctx& ctx, int64_t epoch);
Plan RespondLeaseCanceled();
// 200 {lease_expires_at, ttl_s, cancel: false}: a heartbeat that renewed the lease.
Plan RespondLeaseRenewed(const Ctx& ctx, int64_t expires_at_ms);

// Object keys. Checkpoints: jobs/<id>/ckpt/e<epoch>/s<step, 10 digits>;
// outputs: jobs/<id>/out/e<epoch>/<name>; samples: jobs/<id>/samples/e<epoch>/s<step, 10
// digits>/<index>.png.
std::string CheckpointKey(const std::string& job, int64_t epoch, int64_t step);
std::string SampleKey(const std::string& job, int64_t epoch, int64_t step, int64_t index);
std::string OutputKey(const std::string& job, int64_t epoch, const std::string& name);

}  // namespace gleaner::core
