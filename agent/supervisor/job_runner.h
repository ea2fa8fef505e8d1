// Runs one assigned job, or one replay of a training segment, to its end on this node (DESIGN
// §4 steps 3–8):
// inputs from the cache, the resume checkpoint (verified, unpacked), gleaner-train as a child,
// heartbeats on their own thread, checkpoint uploads in the background, then complete / fail /
// release. The trainer crashing never takes the agent with it. A failure is reported with its
// cause (api.h FailCause): the job's inputs (the trainer exited kExitFailed; an input that
// cannot be fetched for a reason other than a transient one) or this node (anything else).
//
// A replay (a verification lease, Assignment::verification_id) runs the same way with the
// trainer told to stop at the segment's end (--stop-at-step): heartbeats go to the
// verification's route under its own epoch, nothing is uploaded while it trains and nothing is
// recorded in the state dir; at the end the checkpoint of stop_step is packed, uploaded to the
// verification's URL and its sha256 committed. A replay that cannot finish reports nothing: its
// lease lapses and another node takes it.
//
// What happens to the lease and the trainer, and the verdict at the end, is decided in one place:
// the pure state machine of job_state.h. The runner's threads only report what they see
// (heartbeat replies, time passing, the trainer's exit) and carry out its one action, which is
// also the only place the trainer is signalled (LeaseRun::Apply).
//
// Where it lives: job_runner.cc is the mainline of one lease (prepare → start the trainer →
// follow it → deliver or hand back); lease_run.h holds what the lease's threads share (the
// state machine, the heartbeat loop, the trainer's progress lines); lease_prepare.h the work
// dir's inputs, the resume checkpoint and SPEC.json (TrainerSpec); lease_delivery.h complete
// and the replay's commit; lease_recovery.h release, fail, lost, drop and RecoverPendingJob.
//
// Threads: RunJob() blocks the caller; it starts a heartbeat thread and an uploader thread and
// the child's reader threads, and joins them all before returning.
#pragma once

#include <chrono>
#include <string>

#include "agent/supervisor/api.h"
#include "agent/supervisor/cache.h"
#include "agent/supervisor/config.h"
#include "agent/supervisor/state.h"
#include "agent/supervisor/status_board.h"
#include "agent/supervisor/stop.h"

namespace gleaner::agent {

enum class JobOutcome {
  kCompleted,  // outputs uploaded, /complete accepted
  kFailed,     // /fail reported (trainer failed or crashed, or inputs were bad)
  kReleased,   // stopped for shutdown: last checkpoint committed, /release sent
  kLost,       // 409: the lease is no longer ours; everything local was discarded
  kCanceled,   // the coordinator said cancel: stopped, nothing reported
  kAbandoned,  // could not reach a verdict before the shutdown deadline
  kDropped,    // a replay given up (trainer failed, handed back): nothing reported
};
const char* JobOutcomeName(JobOutcome o);

struct ShutdownState {
  StopToken stop;                                  // requested on the agent's first SIGTERM/SIGINT
  std::chrono::steady_clock::time_point deadline;  // valid once stop is requested
  // The owner controls (owner_gate.h) ask for the job back: handed back like a shutdown, but the
  // agent keeps running. The main loop clears it before claiming work.
  HandBack hand_back;
  StatusBoard board;  // the job's progress, for `gleaner-agent status`
};

// What a trainer's end (a waitpid status) is attributed to when the job fails: an exit with
// kExitFailed (trainer_protocol.h: bad dataset, model or params, NaN loss, fail_at_step) is the
// job's input; any other code, or a signal death, is the node's.
FailCause FailCauseOfExit(int wait_status);

JobOutcome RunJob(const AgentConfig& config, CoordinatorApi* api, StateDir* state, BlobCache* cache,
                  const Assignment& job, ShutdownState* shutdown);

// After a restart: finishes the checkpoint uploads recorded in the state dir through the
// CheckpointUploader's own path (409: the lease is gone, they are dropped), releases that job so
// it is re-queued at once, clears the record.
void RecoverPendingJob(CoordinatorApi* api, StateDir* state, const ShutdownState* shutdown);

}  // namespace gleaner::agent
