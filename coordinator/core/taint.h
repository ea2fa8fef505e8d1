// Taint that follows a cheater (docs/architecture.md "Verified training"): when a replay's
// verdict quarantines a node for forging (trainer_bad, or verifier_bad: it forged a replay),
// every segment it trained is distrusted, not only the one the replay caught. Each job whose
// lineage still holds work of that node (a segment of it not already discarded that committed
// a checkpoint, or is still open) goes back to the newest checkpoint at or before the step that
// node's first such segment started from: running jobs lose their lease, completed and
// verifying jobs are pending again with a `job_reopens` row (the event "reopened: a node in
// this job's lineage was found forging", naming the outputs the job had released). The work
// discarded is marked `segments.rework`: verification rework, billed apart from the job's
// training.
//
// Pure SQL building: the statements are appended to the verification commit's batch and act
// only on the row that batch finished with that nonce and a quarantining verdict (every state
// change of the commit stays one batch). Scratch rows in `taint_rewinds` (keyed by the nonce)
// hold the set of jobs and their rewind steps so that every statement acts on the same set;
// the last statement deletes them. No errors of its own; not thread-affine.
#pragma once

#include <cstdint>
#include <string>

#include "coordinator/core/sql.h"

namespace gleaner::core {

// Appends the taint rewind to `b`. `nonce` is the lease nonce the commit stamped on the
// verifications row it finished; `now` the request's time. Returns the index of the statement
// that deletes discarded checkpoints (RETURNING key: objects the shell deletes after the
// answer).
size_t AddTaintRewind(Batch* b, const std::string& nonce, int64_t now);

// The text of the reopen event a developer reads (job events).
extern const char* const kReopenedMessage;

}  // namespace gleaner::core
