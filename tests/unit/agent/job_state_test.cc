// The job runner's state machine with literal events and times (no threads, no clock).
#include "agent/supervisor/job_state.h"

#include <catch2/catch.hpp>

#include "agent/protocol/trainer_protocol.h"

using namespace gleaner;
using namespace gleaner::agent;

namespace {

using Type = JobEvent::Type;
using Lease = JobState::Lease;
using Trainer = JobState::Trainer;
using Verdict = JobState::Verdict;

JobEvent At(Type type, double t) {
  JobEvent e;
  e.type = type;
  e.at_s = t;
  return e;
}

JobEvent Renewed(double sent_at, double ttl) {
  JobEvent e = At(Type::kLeaseRenewed, sent_at);
  e.ttl_s = ttl;
  return e;
}

JobEvent Tick(double t, bool yielding = false, double yield_left = 1e9) {
  JobEvent e = At(Type::kTick, t);
  e.yielding = yielding;
  e.yield_seconds_left = yield_left;
  return e;
}

JobEvent Exited(int code) {
  JobEvent e = At(Type::kTrainerExited, 0);
  e.exit_code = code;
  return e;
}

// A job whose lease (ttl 60 s, claimed at t = 100) is held and whose trainer runs.
JobState Training() {
  JobState s = Step(JobState(), Renewed(100, 60)).state;
  return Step(s, At(Type::kTrainerStarted, 101)).state;
}

}  // namespace

TEST_CASE("the lease ends a margin before the coordinator's end, from when it was asked",
          "[job_state]") {
  CHECK(LeaseMargin(60) == 2.0);
  CHECK(LeaseMargin(4) == 1.0);  // a quarter of a short lease
  JobState s = Training();
  CHECK(s.lease_end_s == 158);
  // A heartbeat sent at 130 and accepted: the lease runs from 130, not from the reply.
  s = Step(s, Renewed(130, 60)).state;
  CHECK(s.lease_end_s == 188);
  JobStep before = Step(s, Tick(187.9));
  CHECK(before.state.held());
  CHECK(before.action == TrainerAction::kNone);
  JobStep after = Step(s, Tick(188));
  CHECK(after.state.lease == Lease::kLost);
  CHECK(after.action == TrainerAction::kKill);
  CHECK(after.state.trainer == Trainer::kKilled);
  CHECK(after.why.find("lease lost, stopping the trainer") != std::string::npos);
}

TEST_CASE("a refused lease call or a cancel kills a running trainer at once", "[job_state]") {
  JobStep refused = Step(Training(), At(Type::kLeaseRefused, 120));
  CHECK(refused.state.lease == Lease::kLost);
  CHECK(refused.action == TrainerAction::kKill);
  JobStep canceled = Step(Training(), At(Type::kCanceled, 120));
  CHECK(canceled.state.lease == Lease::kCanceled);
  CHECK(canceled.action == TrainerAction::kKill);
  CHECK(canceled.why == "canceled by the coordinator, stopping the trainer");
  // Nothing more happens to a lost lease: no second kill, no renewal, no cancel over it.
  CHECK(Step(refused.state, At(Type::kCanceled, 121)).action == TrainerAction::kNone);
  CHECK(Step(refused.state, At(Type::kCanceled, 121)).state.lease == Lease::kLost);
  CHECK(Step(refused.state, Renewed(121, 60)).state.lease_end_s == 158);
}

TEST_CASE("before the trainer starts a lost lease kills nothing, and a late start is killed",
          "[job_state]") {
  JobState s = Step(JobState(), Renewed(100, 60)).state;
  JobStep lost = Step(s, At(Type::kLeaseRefused, 110));
  CHECK(lost.state.lease == Lease::kLost);
  CHECK(lost.action == TrainerAction::kNone);
  CHECK(lost.why == "lease lost");
  CHECK(ShouldGiveUp(lost.state, 1e9));
  JobStep started = Step(lost.state, At(Type::kTrainerStarted, 111));
  CHECK(started.action == TrainerAction::kKill);
  CHECK(started.state.trainer == Trainer::kKilled);
}

TEST_CASE("handing back: checkpoint first, kill 2 s before the deadline", "[job_state]") {
  JobState s = Training();
  JobStep asked = Step(s, Tick(120, /*yielding=*/true, /*yield_left=*/20));
  CHECK(asked.action == TrainerAction::kCheckpoint);
  CHECK(asked.state.trainer == Trainer::kCheckpointing);
  CHECK(asked.state.yielded);
  // Asked once only.
  JobStep again = Step(asked.state, Tick(121, true, 19));
  CHECK(again.action == TrainerAction::kNone);
  JobStep late = Step(asked.state, Tick(138.5, true, 1.5));
  CHECK(late.action == TrainerAction::kKill);
  CHECK(late.state.trainer == Trainer::kKilled);
  CHECK(Step(late.state, Tick(139, true, 1)).action == TrainerAction::kNone);
  // Not yielding: ticks change nothing.
  CHECK(Step(s, Tick(120)).action == TrainerAction::kNone);
  CHECK_FALSE(Step(s, Tick(120)).state.yielded);
  // The give-up threshold for retries.
  CHECK_FALSE(ShouldGiveUp(s, 0.6));
  CHECK(ShouldGiveUp(s, 0.4));
}

TEST_CASE("the verdict when the trainer exits", "[job_state]") {
  CHECK(Step(Training(), Exited(kExitDone)).state.verdict == Verdict::kComplete);
  CHECK(Step(Training(), Exited(kExitInterrupted)).state.verdict == Verdict::kRelease);
  CHECK(Step(Training(), Exited(kExitFailed)).state.verdict == Verdict::kFail);
  CHECK(Step(Training(), Exited(-1)).state.verdict == Verdict::kFail);  // a crash
  JobState yielding = Step(Training(), Tick(120, true, 20)).state;
  CHECK(Step(yielding, Exited(kExitInterrupted)).state.verdict == Verdict::kRelease);
  CHECK(Step(yielding, Exited(-1)).state.verdict == Verdict::kReleaseLate);
  CHECK(Step(yielding, Exited(kExitFailed)).state.verdict == Verdict::kFail);
  // A lost or canceled lease discards whatever the trainer did, even a finished result.
  JobState lost = Step(Training(), At(Type::kLeaseRefused, 120)).state;
  CHECK(Step(lost, Exited(kExitDone)).state.verdict == Verdict::kDiscard);
  JobState canceled = Step(Training(), At(Type::kCanceled, 120)).state;
  CHECK(Step(canceled, Exited(-1)).state.verdict == Verdict::kDiscard);
  CHECK(Step(Training(), Exited(0)).state.trainer == Trainer::kExited);
}

TEST_CASE("while finishing, a 409 or a cancel is the final call accepted, not a lost lease",
          "[job_state]") {
  JobState s = Step(Training(), Exited(kExitDone)).state;
  s = Step(s, At(Type::kFinishing, 130)).state;
  CHECK(s.finishing);
  CHECK(Step(s, At(Type::kLeaseRefused, 131)).state.held());
  CHECK(Step(s, At(Type::kCanceled, 131)).state.held());
  // Nor does the lease end under a final call that takes long.
  CHECK(Step(s, Tick(1000)).state.held());
}

namespace {

// A verification lease (ttl 60 s, claimed at t = 100) whose replaying trainer runs.
JobState Replaying() {
  JobState s;
  s.work = JobState::Work::kReplay;
  s = Step(s, Renewed(100, 60)).state;
  return Step(s, At(Type::kTrainerStarted, 101)).state;
}

}  // namespace

TEST_CASE("a replay that reaches its stop step is committed, any other end dropped",
          "[job_state]") {
  CHECK(Step(Replaying(), Exited(kExitDone)).state.verdict == Verdict::kComplete);
  // A replay has no release and no fail to report: its lease lapses for another node.
  for (int code : {kExitFailed, kExitInterrupted, kExitUsage, -1}) {
    INFO(code);
    CHECK(Step(Replaying(), Exited(code)).state.verdict == Verdict::kDrop);
  }
  // A training lease keeps its verdicts.
  CHECK(Step(Training(), Exited(kExitFailed)).state.verdict == Verdict::kFail);
  CHECK(Step(Training(), Exited(kExitInterrupted)).state.verdict == Verdict::kRelease);
}

TEST_CASE("handing a replay back kills its trainer at once, no checkpoint asked", "[job_state]") {
  JobStep st = Step(Replaying(), Tick(110, /*yielding=*/true, /*yield_left=*/15));
  CHECK(st.action == TrainerAction::kKill);
  CHECK(st.state.trainer == Trainer::kKilled);
  CHECK(st.state.yielded);
  CHECK(Step(st.state, Exited(-1)).state.verdict == Verdict::kDrop);
  // A training lease is asked to checkpoint instead.
  CHECK(Step(Training(), Tick(110, true, 15)).action == TrainerAction::kCheckpoint);
}

TEST_CASE("a replay's lease is fenced like a job's", "[job_state]") {
  // Past the lease's end without an accepted heartbeat: lost, the trainer killed.
  JobStep st = Step(Replaying(), Tick(158.5));
  CHECK(st.state.lease == Lease::kLost);
  CHECK(st.action == TrainerAction::kKill);
  CHECK(Step(st.state, Exited(kExitDone)).state.verdict == Verdict::kDiscard);
  // Voided by the coordinator (a heartbeat says cancel): the same, as canceled.
  st = Step(Replaying(), At(Type::kCanceled, 120));
  CHECK(st.state.lease == Lease::kCanceled);
  CHECK(st.action == TrainerAction::kKill);
  // A 409 on the commit once it is under way is the commit having been accepted.
  JobState s = Step(Replaying(), Exited(kExitDone)).state;
  s = Step(s, At(Type::kFinishing, 130)).state;
  CHECK(Step(s, At(Type::kLeaseRefused, 131)).state.held());
}
