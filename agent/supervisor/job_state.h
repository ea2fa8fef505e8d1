// The job runner's decisions as one pure state machine: what becomes of the lease, what to do
// to the trainer, and the verdict once it has exited. job_runner.cc feeds it the events its
// threads see and carries out what Step() returns; nothing else decides.
//
// Pure: no clock, threads or I/O. Every event carries its time (steady seconds, any origin) and
// what the runner read from the world, so tests drive it with literals (as owner_policy.h).
//
// The rules:
//   - The lease ends a margin (min(2 s, ttl / 4)) before it could expire on the coordinator,
//     counted from when the accepted heartbeat (or the claim) was sent: past that end, or on a
//     409 for any lease call, the lease is lost and a running trainer is killed at once, so a
//     partitioned agent never trains on a lease someone else may hold. A cancel does the same.
//   - Once the final complete / fail / release call is under way (finishing), a 409 or a cancel
//     is that call having been accepted, not a lost lease; the lease no longer ends.
//   - Handing the job back (shutdown, or the owner controls): the trainer is asked to
//     checkpoint (SIGTERM) and killed when less than 2 s are left to the deadline.
//   - A trainer that starts after the lease was lost is killed at once.
//   - Verdict when the trainer exits: lease not held -> discard; exit kExitDone -> complete;
//     kExitInterrupted -> release; killed by a signal after we asked it to checkpoint -> release
//     ("did not checkpoint in time"); anything else -> fail.
//   - A replay (a verification lease: the trainer runs with --stop-at-step) has no checkpoint
//     worth handing back and no release or fail to report: handing it back kills the trainer
//     at once; exit kExitDone -> complete (commit the replayed checkpoint); any other end ->
//     drop (nothing is reported, the lease lapses and another node takes the replay). The lease
//     rules above hold unchanged: a replay is fenced like a job.
#pragma once

#include <string>

namespace gleaner::agent {

struct JobState {
  enum class Work { kTrain, kReplay };  // a job lease, or a verification lease
  enum class Lease { kHeld, kLost, kCanceled };
  enum class Trainer { kNotStarted, kRunning, kCheckpointing, kKilled, kExited };
  // kComplete: deliver the result (a replay's: its checkpoint). kDrop: replays only.
  enum class Verdict { kNone, kComplete, kRelease, kReleaseLate, kFail, kDiscard, kDrop };

  Work work = Work::kTrain;  // fixed at the start
  Lease lease = Lease::kHeld;
  Trainer trainer = Trainer::kNotStarted;
  Verdict verdict = Verdict::kNone;  // set when the trainer exits
  double lease_end_s = 0;            // steady seconds; past it the lease counts as lost
  bool finishing = false;            // the final complete / fail / release call is under way
  bool yielded = false;              // the trainer was asked to checkpoint to hand the job back

  bool held() const { return lease == Lease::kHeld; }
  bool replay() const { return work == Work::kReplay; }
};

struct JobEvent {
  enum class Type {
    kLeaseRenewed,    // the claim or an accepted heartbeat: sent at at_s, lease ttl_s
    kLeaseRefused,    // a lease call (heartbeat, fresh URLs, upload, commit) answered 409
    kCanceled,        // a heartbeat reply said the job was canceled
    kTick,            // time passes: at_s, and whether (and how soon) the job is handed back
    kTrainerStarted,  // the child process runs
    kTrainerExited,   // exit_code >= 0, or -1 for a death by signal
    kFinishing,       // the final complete / fail / release call is about to be sent
  };
  Type type = Type::kTick;
  double at_s = 0;
  double ttl_s = 0;                 // kLeaseRenewed
  bool yielding = false;            // kTick: shutting down, or the owner controls want the job
  double yield_seconds_left = 1e9;  // kTick: to the hand-back deadline
  int exit_code = -1;               // kTrainerExited
};

enum class TrainerAction {
  kNone,
  kCheckpoint,  // SIGTERM: checkpoint at the next step boundary, then exit kExitInterrupted
  kKill,        // SIGKILL
};

struct JobStep {
  JobState state;
  TrainerAction action = TrainerAction::kNone;
  std::string why;  // what happened, for the log, when the lease or the trainer changed
};

JobStep Step(const JobState& s, const JobEvent& e);

// Margin kept before the coordinator's end of a lease of ttl_s seconds.
double LeaseMargin(double ttl_s);

// Retries of calls for this lease stop: the lease is gone or the hand-back deadline is near.
bool ShouldGiveUp(const JobState& s, double yield_seconds_left);

}  // namespace gleaner::agent
