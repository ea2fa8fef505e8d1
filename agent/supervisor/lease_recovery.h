// How a lease ends when it does not deliver (job_runner.h): handed back (release, with the
// last checkpoint committed first), failed with its cause (fail), lost (a 409, a cancel or the
// lease's end: everything local discarded), or, for a replay, dropped (nothing is reported and
// its lease lapses for another node). RecoverPendingJob, declared in job_runner.h, finishes what
// a previous run of the agent left (its definition lives here too).
//
// Ownership: each acts on the caller's LeaseRun (lease_run.h): it drains or aborts its uploader,
// clears the state dir's record, removes the work dir and, when the job has ended for this
// node, its job cache.
//
// Threading: the mainline's thread only (the heartbeat thread may still run; the final call is
// announced with kFinishing first, so its 409 or cancel is read as that call's answer).
//
// Errors: none returned; each gives the JobOutcome it reached (kAbandoned when the coordinator
// could not be told before the deadline: the state dir keeps what the next start needs).
#pragma once

#include <string>

#include "agent/supervisor/api.h"
#include "agent/supervisor/job_runner.h"
#include "agent/supervisor/lease_run.h"

namespace gleaner::agent {

// The lease is gone (409, lease end) or the job was canceled: discard local work.
JobOutcome Lost(LeaseRun* run);
// Hands the job back (a replay: dropped): waits for checkpoint uploads until the deadline, then
// POST .../release.
JobOutcome Release(LeaseRun* run, const std::string& reason);
// POST .../fail with the reason (cut to 4000 bytes), its cause and the last step reached
// (a replay: dropped).
JobOutcome ReportFailure(LeaseRun* run, const std::string& reason, FailCause cause);
// A replay given up: nothing to report (its lease lapses for another node).
JobOutcome Drop(LeaseRun* run, const std::string& reason);

}  // namespace gleaner::agent
