#include "agent/supervisor/job_state.h"

#include <algorithm>

#include "agent/protocol/trainer_protocol.h"

namespace gleaner::agent {
namespace {

using Lease = JobState::Lease;
using Trainer = JobState::Trainer;
using Verdict = JobState::Verdict;

bool TrainerAlive(const JobState& s) {
  return s.trainer == Trainer::kRunning || s.trainer == Trainer::kCheckpointing;
}

JobStep Kill(JobStep step, const std::string& why) {
  step.state.trainer = Trainer::kKilled;
  step.action = TrainerAction::kKill;
  step.why = why;
  return step;
}

// The lease is gone: a living trainer dies at once.
JobStep LoseLease(JobStep step, Lease how, const std::string& why) {
  step.state.lease = how;
  if (!TrainerAlive(step.state)) {
    step.why = why;
    return step;
  }
  return Kill(step, why + ", stopping the trainer");
}

Verdict VerdictOf(const JobState& s, int exit_code) {
  if (!s.held()) return Verdict::kDiscard;
  if (exit_code == kExitDone) return Verdict::kComplete;
  if (s.replay()) return Verdict::kDrop;  // nothing to hand back or report
  // Interrupted with a checkpoint: by us, or by a signal sent to every process of the service
  // at once. Never the job's fault.
  if (exit_code == kExitInterrupted) return Verdict::kRelease;
  if (s.yielded && exit_code < 0) return Verdict::kReleaseLate;
  return Verdict::kFail;
}

}  // namespace

double LeaseMargin(double ttl_s) {
  // The trainer must be dead before anyone else may claim the job (the kill, and the
  // coordinator's claim, take a moment).
  return std::min(2.0, ttl_s / 4);
}

JobStep Step(const JobState& s, const JobEvent& e) {
  JobStep step;
  step.state = s;
  JobState& n = step.state;
  switch (e.type) {
    case JobEvent::Type::kLeaseRenewed:
      if (n.held()) n.lease_end_s = e.at_s + e.ttl_s - LeaseMargin(e.ttl_s);
      return step;
    case JobEvent::Type::kLeaseRefused:
      if (n.finishing || !n.held()) return step;
      return LoseLease(step, Lease::kLost, "lease lost");
    case JobEvent::Type::kCanceled:
      if (n.finishing || !n.held()) return step;
      return LoseLease(step, Lease::kCanceled, "canceled by the coordinator");
    case JobEvent::Type::kTick:
      if (n.held() && !n.finishing && e.at_s >= n.lease_end_s) {
        return LoseLease(step, Lease::kLost,
                         "no heartbeat accepted in time and the lease is about to expire: lease "
                         "lost");
      }
      if (e.yielding && n.replay() && n.trainer == Trainer::kRunning) {
        n.yielded = true;
        return Kill(step, "handing the replay back: stopping the trainer");
      }
      if (e.yielding && n.trainer == Trainer::kRunning) {
        n.trainer = Trainer::kCheckpointing;
        n.yielded = true;
        step.action = TrainerAction::kCheckpoint;
        step.why = "asking the trainer to checkpoint";
      } else if (n.trainer == Trainer::kCheckpointing && e.yield_seconds_left < 2.0) {
        return Kill(step, "trainer did not stop in time: killing it");
      }
      return step;
    case JobEvent::Type::kTrainerStarted:
      n.trainer = Trainer::kRunning;
      if (!n.held()) return Kill(step, "the lease was lost before the trainer started: killing it");
      return step;
    case JobEvent::Type::kTrainerExited:
      n.trainer = Trainer::kExited;
      n.verdict = VerdictOf(n, e.exit_code);
      return step;
    case JobEvent::Type::kFinishing:
      n.finishing = true;
      return step;
  }
  return step;
}

bool ShouldGiveUp(const JobState& s, double yield_seconds_left) {
  return !s.held() || yield_seconds_left < 0.5;
}

}  // namespace gleaner::agent
