#include "agent/supervisor/lease_recovery.h"

#include <sys/wait.h>

#include <algorithm>

#include "agent/protocol/trainer_protocol.h"
#include "agent/supervisor/log.h"
#include "agent/supervisor/retry.h"
#include "agent/supervisor/uploader.h"
#include "shared/native/files.h"

namespace gleaner::agent {

FailCause FailCauseOfExit(int wait_status) {
  return WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == kExitFailed ? FailCause::kInput
                                                                           : FailCause::kNode;
}

JobOutcome Lost(LeaseRun* run) {
  const bool canceled = run->state().lease == JobState::Lease::kCanceled;
  if (!canceled) Log("%s: lease lost; discarding local work", run->What().c_str());
  if (run->uploader) run->uploader->Abort();
  if (!run->replay()) run->state_dir->ClearCurrentJob();
  files::RemoveTree(run->work_dir);
  if (canceled && !run->replay()) run->RemoveJobCache();  // a voided replay: the job goes on
  return canceled ? JobOutcome::kCanceled : JobOutcome::kLost;
}

JobOutcome Drop(LeaseRun* run, const std::string& reason) {
  Log("%s: dropped, its lease lapses: %s", run->What().c_str(), reason.c_str());
  files::RemoveTree(run->work_dir);
  return JobOutcome::kDropped;
}

JobOutcome Release(LeaseRun* run, const std::string& reason) {
  if (run->replay()) return Drop(run, reason);
  const Assignment& job = run->job;
  CheckpointUploader* uploader = run->uploader.get();
  if (uploader && !uploader->Drain(std::max(0.1, YieldSecondsLeft(run->sd) - 1.0))) {
    Log("job %s: checkpoint upload not finished before the deadline", job.job_id.c_str());
  }
  if (uploader && uploader->lease_lost()) run->Apply(run->Event(JobEvent::Type::kLeaseRefused));
  if (!run->state().held()) return Lost(run);
  if (uploader) run->sd->board.Progress(run->step, uploader->last_committed());
  run->Apply(run->Event(JobEvent::Type::kFinishing));
  Status s = Retry(
      "release", [&] { return run->api->Release(job.job_id, job.epoch, reason); },
      [run] { return run->GiveUp(); }, nullptr, 1.0);
  if (uploader) uploader->Abort();
  if (!s.ok() && s.code() != Code::kConflict) {
    Log("job %s: release failed: %s", job.job_id.c_str(), s.ToString().c_str());
    return JobOutcome::kAbandoned;  // pending uploads stay recorded for the next start
  }
  run->state_dir->ClearCurrentJob();
  Log("job %s: released at step %lld (last committed checkpoint %lld)", job.job_id.c_str(),
      static_cast<long long>(run->step.load()),
      static_cast<long long>(uploader ? uploader->last_committed() : -1));
  return JobOutcome::kReleased;
}

JobOutcome ReportFailure(LeaseRun* run, const std::string& reason, FailCause cause) {
  if (run->replay()) return Drop(run, reason);
  const Assignment& job = run->job;
  Log("job %s: failed (%s): %s", job.job_id.c_str(), FailCauseName(cause), reason.c_str());
  // Checkpoints already written help the next node: give them a moment.
  if (run->uploader) {
    run->uploader->Drain(std::min(10.0, std::max(0.1, YieldSecondsLeft(run->sd) - 1.0)));
    run->uploader->Abort();
  }
  run->Apply(run->Event(JobEvent::Type::kFinishing));
  Status s = Retry(
      "fail",
      [&] {
        return run->api->Fail(job.job_id, job.epoch, reason.substr(0, 4000), cause, run->step);
      },
      [run] { return run->GiveUp(); }, &run->sd->stop);
  run->state_dir->ClearCurrentJob();
  files::RemoveTree(run->work_dir);
  if (s.code() == Code::kConflict) return Lost(run);
  if (s.ok()) run->RemoveJobCache();  // this machine never gets the job again (ban or input error)
  return JobOutcome::kFailed;
}

void RecoverPendingJob(CoordinatorApi* api, StateDir* state, const ShutdownState* shutdown) {
  Result<std::optional<CurrentJob>> cur = state->LoadCurrentJob();
  if (!cur.ok()) {
    Log("state: %s; forgetting the previous job", cur.status().ToString().c_str());
    state->ClearCurrentJob();
    return;
  }
  if (!cur->has_value()) return;
  const CurrentJob& job = **cur;
  Log("job %s: found from a previous run (epoch %lld, %zu pending uploads)", job.job_id.c_str(),
      static_cast<long long>(job.epoch), job.pending.size());
  // Through the uploader's own path for archives packed before the restart: each is checked
  // against its record, then URL, PUT and commit. Only a shutdown cuts it short (not the owner
  // controls: the job is released anyway).
  bool lost = false;
  if (!job.pending.empty()) {
    CheckpointUploader uploader(api, state, job.job_id, job.epoch,
                                state->JobDir(job.job_id, job.epoch), /*keep=*/1);
    for (const PendingUpload& p : job.pending) uploader.EnqueuePacked(p);
    while (!uploader.Drain(0.2)) {
      if (ShutdownSecondsLeft(shutdown) < 0.5) {
        uploader.Abort();
        break;
      }
    }
    lost = uploader.lease_lost();
    if (lost) Log("job %s: lease no longer held; dropping pending uploads", job.job_id.c_str());
  }
  if (!lost) {
    Status s = api->Release(job.job_id, job.epoch, "agent restarted");
    Log("job %s: released after restart: %s", job.job_id.c_str(),
        s.ok() ? "ok" : s.ToString().c_str());
  }
  state->ClearCurrentJob();
  files::RemoveTree(state->JobDir(job.job_id, job.epoch));
}

}  // namespace gleaner::agent
