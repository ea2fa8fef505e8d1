// Delivering what a lease trained, once the trainer exited kExitDone (job_runner.h):
//   - a job: the checkpoint of the last step (with the outputs it exports to) and the samples
//     committed by the uploader, the output files verified against their manifest and
//     uploaded, a final heartbeat with the last step, then POST .../complete;
//   - a replay: the checkpoint of stop_step packed, checked (and, for the last segment, the
//     output against the files that checkpoint records), uploaded to the verification's URL,
//     its sha256 committed.
// Checkpoints the trainer writes while it runs are committed by the CheckpointUploader
// (uploader.h) as they come; this is the end of that road.
//
// Ownership: acts on the caller's LeaseRun (lease_run.h); on success it clears the state dir's
// record and removes the work dir (and the job's cache: the job is done on this node).
//
// Threading: the mainline's thread only.
//
// Errors: none returned. A 409 is a lost lease (lease_recovery.h Lost); output that fails the
// agent's checks fails the job as the node's fault; a replay that cannot deliver is dropped;
// calls that cannot get through before the deadline end as kAbandoned.
#pragma once

#include "agent/supervisor/job_runner.h"
#include "agent/supervisor/lease_run.h"

namespace gleaner::agent {

JobOutcome Complete(LeaseRun* run);
JobOutcome CommitReplay(LeaseRun* run);

}  // namespace gleaner::agent
