// The life of one lease, top to bottom: prepare (work dir, inputs, resume, SPEC.json) → start
// the trainer → follow it until it exits → deliver, or hand the job back. What each step does
// lives in its own file: lease_run.h (the state machine, heartbeats, progress lines),
// lease_prepare.h, lease_delivery.h, lease_recovery.h.
#include "agent/supervisor/job_runner.h"

#include <sys/wait.h>
#include <unistd.h>

#include <memory>
#include <thread>

#include "agent/supervisor/child_process.h"
#include "agent/supervisor/gpu.h"
#include "agent/supervisor/job_cache.h"
#include "agent/supervisor/lease_delivery.h"
#include "agent/supervisor/lease_prepare.h"
#include "agent/supervisor/lease_recovery.h"
#include "agent/supervisor/lease_run.h"
#include "agent/supervisor/log.h"
#include "agent/supervisor/owner_policy.h"
#include "agent/supervisor/retry.h"
#include "agent/supervisor/trainer_env.h"
#include "shared/native/files.h"

namespace gleaner::agent {

const char* JobOutcomeName(JobOutcome o) {
  switch (o) {
    case JobOutcome::kCompleted:
      return "completed";
    case JobOutcome::kFailed:
      return "failed";
    case JobOutcome::kReleased:
      return "released";
    case JobOutcome::kLost:
      return "lost";
    case JobOutcome::kCanceled:
      return "canceled";
    case JobOutcome::kAbandoned:
      return "abandoned";
    case JobOutcome::kDropped:
      return "dropped";
  }
  return "?";
}

namespace {

// The work dir made empty and, for a job lease, recorded for a restart (which releases the
// job; a replay's lease simply lapses); the job cache opened when it can be.
Status PrepareWorkDir(LeaseRun* run) {
  files::RemoveTree(run->work_dir);
  Status s = files::MakeDirs(run->work_dir, 0700);
  if (s.ok() && !run->replay()) {
    s = run->state_dir->SaveCurrentJob(CurrentJob{run->job.job_id, run->job.epoch, {}});
  }
  if (!s.ok()) return s;
  Status cache = OpenJobCache(run->cache_dir);
  run->cache_opened = cache.ok();
  if (!cache.ok()) {
    Log("job %s: job cache: %s (running without it)", run->job.job_id.c_str(),
        cache.ToString().c_str());
  }
  return Status::Ok();
}

// Starts gleaner-train on the spec with this node's memory budget and rlimits (trainer_env.h):
// what it can give right now.
Result<std::unique_ptr<ChildProcess>> StartTrainer(LeaseRun* run, const TrainerSpec& spec,
                                                   const std::string& spec_path) {
  const AgentConfig& config = run->config;
  std::vector<std::string> argv = spec.CommandLine(config.trainer, spec_path, run->work_dir,
                                                   run->cache_opened ? run->cache_dir : "");
  GpuInfo gpu = DetectGpu(config.owner.gpus);
  const TrainerLimits limits = TrainerLimitsFor(
      gpu.name, AdvertisedVramMb(gpu.vram_mb, config.owner.max_vram_mb), DetectHostMemoryBytes());
  std::vector<std::string> env = TrainerEnvironment(environ);
  for (std::string& e : BudgetEnvironment(limits.budget)) env.push_back(std::move(e));
  Log("%s: trainer budget: RAM %lld MiB, VRAM %lld MiB%s", run->What().c_str(),
      static_cast<long long>(limits.budget.host_bytes >> 20),
      static_cast<long long>(limits.budget.device_bytes >> 20),
      limits.rlimits.data_bytes > 0 ? " (RLIMIT_DATA)" : "");
  return ChildProcess::Start(
      argv, [run](const std::string& l) { run->OnStdout(l); },
      [run](const std::string& l) { run->OnStderr(l); }, &env, &limits.rlimits);
}

// Follows the trainer until it exits; returns its waitpid status. The heartbeat thread ends the
// lease on time; the ticks here also cover a heartbeat call stuck past that moment, and hand the
// job back when asked.
int FollowTrainer(LeaseRun* run, ChildProcess* child) {
  run->SetChild(child);
  run->Apply(run->Event(JobEvent::Type::kTrainerStarted));
  run->sd->board.TrainerStarted();
  int wait_status = 0;
  while (!child->WaitFor(100, &wait_status)) {
    run->sd->board.Progress(run->step, run->uploader ? run->uploader->last_committed() : -1);
    run->Apply(run->Tick());
  }
  run->sd->board.TrainerStopped();
  run->SetChild(nullptr);
  if (run->uploader && run->uploader->lease_lost()) {
    run->Apply(run->Event(JobEvent::Type::kLeaseRefused));
  }
  JobEvent exited = run->Event(JobEvent::Type::kTrainerExited);
  exited.exit_code = WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : -1;
  run->Apply(exited);
  return wait_status;
}

// The state machine's verdict on the trainer's end, carried out: deliver or hand back.
JobOutcome Finish(LeaseRun* run, int wait_status) {
  const JobState s = run->state();
  const std::string ended = "trainer " + DescribeWaitStatus(wait_status);
  switch (s.verdict) {
    case JobState::Verdict::kDiscard:
      return Lost(run);
    case JobState::Verdict::kComplete:
      return run->replay() ? CommitReplay(run) : Complete(run);
    case JobState::Verdict::kDrop:
      return Drop(run, s.yielded ? run->YieldReason(true) : ended);
    case JobState::Verdict::kRelease:
      return Release(run, run->YieldReason(s.yielded));
    case JobState::Verdict::kReleaseLate:
      return Release(run, run->YieldReason(true) + " (trainer did not checkpoint in time)");
    case JobState::Verdict::kFail:
    case JobState::Verdict::kNone:
      break;
  }
  return ReportFailure(run, ended + run->TrainerDiagnostics(), FailCauseOfExit(wait_status));
}

// The mainline of one lease.
JobOutcome Go(LeaseRun* run) {
  const Assignment& job = run->job;
  Log("%s: epoch %lld, kind %s, %lld steps%s%s", run->What().c_str(),
      static_cast<long long>(job.epoch), job.kind.c_str(), static_cast<long long>(job.steps),
      job.resume ? (", resume from step " + std::to_string(job.resume_step)).c_str() : "",
      run->replay() ? (", replay to step " + std::to_string(job.stop_step)).c_str() : "");
  run->sd->board.JobStarted(job.job_id, job.epoch, run->replay() ? job.stop_step : job.steps,
                            job.resume_step);
  Status s = PrepareWorkDir(run);
  if (!s.ok()) {
    Log("%s: cannot prepare the work directory: %s", run->What().c_str(), s.ToString().c_str());
    if (run->replay()) return Drop(run, "node storage error");
    // Not the job's fault: hand it back.
    run->api->Release(job.job_id, job.epoch, "node storage error");
    return JobOutcome::kReleased;
  }
  run->StartLease();
  std::thread heartbeat([run] { run->HeartbeatLoop(); });
  struct Joiner {
    StopToken* stop;
    std::thread* t;
    ~Joiner() {
      stop->Request();
      t->join();
    }
  } joiner{&run->hb_stop, &heartbeat};

  // 1. Prepare: the model's format, the inputs, the resume checkpoint, SPEC.json.
  s = CheckModelFormat(job);
  if (!s.ok()) return ReportFailure(run, s.message(), FailCause::kNode);
  std::vector<TrainerInput> inputs;
  s = PrepareInputs(run, &inputs);
  if (!run->state().held()) return Lost(run);
  if (!s.ok()) {
    if (IsTransient(s)) return Release(run, "inputs unavailable: " + s.message());
    return ReportFailure(run, s.message(), FailCause::kInput);
  }
  std::string resume_dir = PrepareResume(run);
  if (!run->state().held()) return Lost(run);
  if (Yielding(run->sd)) return Release(run, run->YieldReason(true));
  const TrainerSpec spec = SpecFor(job, std::move(inputs), resume_dir);
  Result<std::string> spec_path = WriteSpec(spec, run->work_dir);
  if (spec_path.status().code() == Code::kInvalidArgument) {
    return ReportFailure(run, spec_path.status().message(), FailCause::kInput);
  }
  if (!spec_path.ok()) return Release(run, "node storage error: " + spec_path.status().message());

  // 2. Start the trainer (a job's checkpoints are committed as it writes them).
  if (!run->replay()) {
    run->uploader.reset(new CheckpointUploader(run->api, run->state_dir, job.job_id, job.epoch,
                                               run->work_dir, run->config.keep_checkpoints));
  }
  Result<std::unique_ptr<ChildProcess>> child = StartTrainer(run, spec, *spec_path);
  if (!child.ok()) {
    return ReportFailure(run, "cannot start the trainer: " + child.status().message(),
                         FailCause::kNode);
  }
  // 3. Follow it to its end.
  int wait_status = FollowTrainer(run, child->get());
  child->reset();
  // 4. Deliver, or hand the job back.
  return Finish(run, wait_status);
}

}  // namespace

JobOutcome RunJob(const AgentConfig& config, CoordinatorApi* api, StateDir* state, BlobCache* cache,
                  const Assignment& job, ShutdownState* shutdown) {
  LeaseRun run(config, api, state, cache, job, shutdown);
  JobOutcome o = Go(&run);
  shutdown->board.JobEnded(o == JobOutcome::kCompleted);
  return o;
}

}  // namespace gleaner::agent
