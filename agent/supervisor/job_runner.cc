#include "agent/supervisor/job_runner.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "agent/protocol/checkpoint_dir.h"
#include "agent/protocol/trainer_protocol.h"
#include "agent/supervisor/archive.h"
#include "agent/supervisor/child_process.h"
#include "agent/supervisor/gpu.h"
#include "agent/supervisor/job_cache.h"
#include "agent/supervisor/job_state.h"
#include "agent/supervisor/log.h"
#include "agent/supervisor/owner_policy.h"
#include "agent/supervisor/retry.h"
#include "agent/supervisor/trainer_env.h"
#include "agent/supervisor/uploader.h"
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

using Clock = std::chrono::steady_clock;

// The steady clock in seconds: the time every JobEvent carries.
double Seconds(Clock::time_point t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}
double NowS() {
  return Seconds(Clock::now());
}

double ShutdownSecondsLeft(const ShutdownState* sd) {
  if (!sd->stop.requested()) return 1e9;
  return std::chrono::duration<double>(sd->deadline - Clock::now()).count();
}

// Time left to hand the job back: the shutdown's deadline or the owner controls' one.
double SecondsLeft(const ShutdownState* sd) {
  return std::min(ShutdownSecondsLeft(sd), sd->hand_back.SecondsLeft());
}

// Shutting down, or the owner controls want the job back.
bool Yielding(const ShutdownState* sd) {
  return sd->stop.requested() || sd->hand_back.requested();
}

// Everything one job shares between its threads.
class Run {
 public:
  Run(const AgentConfig& config, CoordinatorApi* api, StateDir* state, BlobCache* cache,
      const Assignment& job, ShutdownState* shutdown)
      : config_(config),
        api_(api),
        state_dir_(state),
        cache_(cache),
        job_(job),
        sd_(shutdown),
        work_dir_(state->JobDir(job.job_id, job.epoch)),
        cache_dir_(state->JobCacheDir(job.job_id)) {
    if (!job.verification_id.empty()) state_.work = JobState::Work::kReplay;
    // A replay's work dir is its own (the verification's epoch is not the job's).
    if (state_.replay()) work_dir_ = state->JobDir(job.verification_id, job.epoch);
  }

  JobOutcome Go();

 private:
  // Every event goes through Apply: the state machine (job_state.h) decides, and Apply carries
  // out its action. It is the one place that signals the trainer.
  void Apply(const JobEvent& e);
  JobEvent Event(JobEvent::Type type) const {
    JobEvent e;
    e.type = type;
    e.at_s = NowS();
    return e;
  }
  // Time passes: the lease may end, a hand-back may ask the trainer to stop.
  JobEvent Tick() const {
    JobEvent e = Event(JobEvent::Type::kTick);
    e.yielding = Yielding(sd_);
    e.yield_seconds_left = SecondsLeft(sd_);
    return e;
  }
  JobState state() const {
    std::lock_guard<std::mutex> lock(mu_);
    return state_;
  }
  // Gives up retrying when the lease is gone or the shutdown deadline is near.
  bool GiveUp() const { return ShouldGiveUp(state(), SecondsLeft(sd_)); }
  void HeartbeatLoop();
  double LeaseSecondsLeft() const { return state().lease_end_s - NowS(); }
  double DefaultTtl() const {
    return job_.lease_ttl_s > 0 ? job_.lease_ttl_s : 2 * job_.heartbeat_interval_s;
  }
  void OnStdout(const std::string& line);
  void OnStderr(const std::string& line);
  Status PrepareInputs(Json* inputs);
  std::string PrepareResume();
  // Runs download(*obj) with retries; when storage refuses the URL (403: it expired during an
  // earlier long download), asks the coordinator once for fresh URLs and tries again.
  Status Download(const std::string& what, RemoteObject* obj,
                  const std::function<Status(const RemoteObject&)>& download);
  // Supervises the trainer until it exits; returns its waitpid status.
  int Train(ChildProcess* child);
  JobOutcome Finish(int wait_status);
  JobOutcome Complete();
  JobOutcome ReportFailure(const std::string& reason, FailCause cause);
  JobOutcome Release(const std::string& reason);
  JobOutcome Lost();
  // A replay: pack the checkpoint of stop_step, upload it, commit its sha256.
  JobOutcome CommitReplay();
  // A replay given up: nothing to report (its lease lapses for another node).
  JobOutcome Drop(const std::string& reason);
  bool replay() const { return !job_.verification_id.empty(); }
  // "job j_…" or "replay v_… of job j_…", for the log.
  std::string What() const {
    return job_.verification_id.empty()
               ? "job " + job_.job_id
               : "replay " + job_.verification_id + " of job " + job_.job_id;
  }
  Result<HeartbeatReply> SendHeartbeat(int timeout_ms) {
    if (replay())
      return api_->VerificationHeartbeat(job_.verification_id, job_.epoch, step_, timeout_ms);
    double loss;
    bool has_loss;
    {
      std::lock_guard<std::mutex> lock(mu_);
      loss = loss_;
      has_loss = has_loss_;
    }
    return api_->Heartbeat(job_.job_id, job_.epoch, step_, loss, has_loss, timeout_ms);
  }
  // The job has ended for this node (completed, failed, canceled): its cache goes too.
  void RemoveJobCache() {
    Status s = files::RemoveTree(cache_dir_);
    if (!s.ok()) Log("job %s: job cache: %s", job_.job_id.c_str(), s.ToString().c_str());
  }
  // The release reason when the trainer stopped with a checkpoint (asked by us or not).
  std::string YieldReason(bool asked) const {
    if (sd_->stop.requested()) return "agent shutting down";
    if (sd_->hand_back.requested()) return "owner: " + sd_->hand_back.reason();
    return asked ? "agent shutting down" : "trainer interrupted";
  }

  const AgentConfig& config_;
  CoordinatorApi* api_;
  StateDir* state_dir_;
  BlobCache* cache_;
  Assignment job_;
  ShutdownState* sd_;
  std::string work_dir_;
  std::string cache_dir_;      // job_cache.h
  bool cache_opened_ = false;  // else the trainer runs without --cache-dir

  std::atomic<int64_t> step_{0};
  mutable std::mutex mu_;  // guards state_, child_, loss_, stderr_tail_, error_reason_
  JobState state_;
  ChildProcess* child_ = nullptr;
  double loss_ = 0;
  bool has_loss_ = false;
  std::deque<std::string> stderr_tail_;
  std::string error_reason_;
  StopToken hb_stop_;
  std::unique_ptr<CheckpointUploader> uploader_;
};

void Run::Apply(const JobEvent& e) {
  std::lock_guard<std::mutex> lock(mu_);
  JobStep step = Step(state_, e);
  state_ = step.state;
  if (!step.why.empty()) {
    const char* context = "";
    if (step.action == TrainerAction::kCheckpoint) {
      context = sd_->stop.requested() ? "shutdown requested: " : "handing the job back: ";
    }
    Log("%s: %s%s", What().c_str(), context, step.why.c_str());
  }
  if (step.action != TrainerAction::kNone && child_ != nullptr) {
    child_->Signal(step.action == TrainerAction::kKill ? SIGKILL : SIGTERM);
  }
}

void Run::HeartbeatLoop() {
  const double interval =
      config_.heartbeat_override_s > 0 ? config_.heartbeat_override_s : job_.heartbeat_interval_s;
  // After a failed heartbeat, retry soon: the lease is only ttl long.
  const double retry = std::min(1.0, interval / 4);
  // The usual cadence (billing counts heartbeats x interval), unless an interval that does not
  // fit the lease (--heartbeat-interval) would let it run out first.
  auto cadence = [&] {
    const double left = LeaseSecondsLeft();
    return interval <= left * 0.75 ? interval : std::max(0.0, left / 2);
  };
  double wait = cadence();
  while (true) {
    if (hb_stop_.WaitFor(std::max(0.0, std::min(wait, LeaseSecondsLeft())))) return;
    Apply(Tick());
    if (state().finishing || !state().held()) return;
    JobEvent renewed = Event(JobEvent::Type::kLeaseRenewed);  // at_s: when it was asked
    // Never wait for a reply past the lease's end, and leave time for a retry when the
    // lease allows it (a call stuck on a dead connection must not use up the whole lease).
    const double left = LeaseSecondsLeft();
    const int timeout_ms = int(
        1000 * std::clamp(std::min(left, std::max(1.0, std::min(interval, left / 2))), 0.1, 30.0));
    Result<HeartbeatReply> r = SendHeartbeat(timeout_ms);
    if (state().finishing) return;
    if (!r.ok()) {
      if (r.status().code() == Code::kConflict) {
        Log("%s: heartbeat refused (%s)", What().c_str(), r.status().message().c_str());
        Apply(Event(JobEvent::Type::kLeaseRefused));
        return;
      }
      Log("%s: heartbeat failed: %s", What().c_str(), r.status().ToString().c_str());
      wait = retry;
      continue;
    }
    if (r->cancel) {
      Apply(Event(JobEvent::Type::kCanceled));
      return;
    }
    renewed.ttl_s = r->ttl_s > 0 ? r->ttl_s : DefaultTtl();
    Apply(renewed);
    wait = std::max(0.0, cadence() - (NowS() - renewed.at_s));
  }
}

void Run::OnStdout(const std::string& line) {
  Result<ProgressEvent> e = ParseProgressEvent(line);
  if (!e.ok()) {
    if (e.status().code() != Code::kNotFound) {
      Log("%s: bad progress line: %s", What().c_str(), e.status().message().c_str());
    }
    return;
  }
  switch (e->type) {
    case ProgressEvent::Type::kProgress: {
      step_ = e->step;
      std::lock_guard<std::mutex> lock(mu_);
      loss_ = e->loss;
      has_loss_ = e->has_loss;
      break;
    }
    case ProgressEvent::Type::kCheckpoint:
      if (e->step > job_.resume_step || !job_.resume) {
        if (uploader_ != nullptr) uploader_->Enqueue(e->step, e->dir);
      }
      break;
    case ProgressEvent::Type::kSamples:
      if (uploader_ != nullptr) uploader_->EnqueueSamples(e->step, e->dir);
      break;
    case ProgressEvent::Type::kDone:
      step_ = e->step;
      break;
    case ProgressEvent::Type::kClassImages:
      Log("job %s: %lld class images rendered in %.1f s", job_.job_id.c_str(),
          static_cast<long long>(e->count), e->seconds);
      break;
    case ProgressEvent::Type::kError: {
      std::lock_guard<std::mutex> lock(mu_);
      error_reason_ = e->reason;
      break;
    }
  }
}

void Run::OnStderr(const std::string& line) {
  std::lock_guard<std::mutex> lock(mu_);
  stderr_tail_.push_back(line.substr(0, 500));
  while (stderr_tail_.size() > 20) stderr_tail_.pop_front();
}

Status Run::Download(const std::string& what, RemoteObject* obj,
                     const std::function<Status(const RemoteObject&)>& download) {
  auto give_up = [this] { return GiveUp() || sd_->stop.requested(); };
  auto attempt = [&] { return download(*obj); };
  Status s = Retry(what, attempt, give_up, &sd_->stop);
  // A verification lease has no route that mints its URLs again.
  if (s.code() != Code::kPermissionDenied || replay()) return s;
  Log("job %s: %s: URL refused (%s); asking for fresh URLs", job_.job_id.c_str(), what.c_str(),
      s.message().c_str());
  Result<Downloads> fresh = Status::Unavailable("not asked");
  Status asked = Retry(
      "fresh download URLs",
      [&] {
        fresh = api_->FreshDownloads(job_.job_id, job_.epoch);
        return fresh.status();
      },
      give_up, &sd_->stop);
  if (asked.code() == Code::kConflict) {
    Log("job %s: fresh URLs refused (%s)", job_.job_id.c_str(), asked.message().c_str());
    Apply(Event(JobEvent::Type::kLeaseRefused));
  }
  if (!asked.ok()) return asked;
  for (const RemoteObject& in : fresh->inputs) {
    for (RemoteObject& mine : job_.inputs) {
      if (mine.name == in.name && mine.sha256 == in.sha256) mine.url = in.url;
    }
  }
  if (job_.resume && fresh->resume && fresh->resume->sha256 == job_.resume->sha256) {
    job_.resume->url = fresh->resume->url;
  }
  return Retry(what, attempt, give_up, &sd_->stop);
}

Status Run::PrepareInputs(Json* inputs) {
  std::set<std::string> keep;
  // A folder input (a diffusers model's files) is fetched file by file into the cache, then
  // linked into work_dir/<name>/ in its layout; the trainer gets that directory.
  std::map<std::string, std::pair<std::vector<std::string>, std::vector<std::string>>> folders;
  for (RemoteObject& in : job_.inputs) {
    std::string path;
    std::string what = "input " + in.name + (in.path.empty() ? "" : "/" + in.path);
    Status s = Download(what, &in, [&](const RemoteObject& o) {
      Result<std::string> p = cache_->Fetch(api_, o);
      if (p.ok()) path = *p;
      return p.status();
    });
    if (!s.ok() && in.remote) {
      // A file on a host the developer chose: what it answered (status, bytes, sizes, hashes)
      // or that it could not be reached stays in this log, never in the job's failure reason.
      Log("job %s: %s: %s", job_.job_id.c_str(), what.c_str(), s.ToString().c_str());
      return Status(s.code(), kModelFileUnavailable);
    }
    if (!s.ok()) return Status(s.code(), what + ": " + s.message());
    keep.insert(path);
    if (in.path.empty()) {
      (*inputs)[in.name] = path;
      continue;
    }
    folders[in.name].first.push_back(in.path);
    folders[in.name].second.push_back(path);
  }
  for (const auto& [name, files] : folders) {
    std::string dir = files::Join(work_dir_, "inputs/" + name);
    Status s = MaterializeFolder(dir, files.first, files.second);
    if (!s.ok()) return Status(Code::kIo, "input " + name + ": " + s.message());
    (*inputs)[name] = dir;
  }
  cache_->Evict(keep);
  return Status::Ok();
}

std::string Run::PrepareResume() {
  if (!job_.resume) return "";
  std::string archive = files::Join(work_dir_, "resume.gckpt");
  std::string dir = files::Join(work_dir_, "resume");
  Status s = Download("resume checkpoint", &*job_.resume, [&](const RemoteObject& r) {
    return DownloadVerified(api_, r.url, r.sha256, r.size, archive);
  });
  if (s.ok()) {
    Result<CheckpointManifest> m = UnpackCheckpoint(archive, dir);
    if (!m.ok()) {
      s = m.status();
    } else if (m->step != job_.resume_step) {
      s = Status::Corruption("archive holds step " + std::to_string(m->step));
    }
  }
  files::RemoveTree(archive);
  if (!s.ok() && (sd_->stop.requested() || !state().held())) return "";  // Go() stops next
  if (!s.ok()) {
    Log("%s: resume checkpoint step %lld failed verification (%s); starting from scratch",
        What().c_str(), static_cast<long long>(job_.resume_step), s.ToString().c_str());
    job_.resume.reset();
    job_.resume_step = 0;
    files::RemoveTree(dir);
    return "";
  }
  Log("%s: resuming from checkpoint step %lld (sha256 verified)", What().c_str(),
      static_cast<long long>(job_.resume_step));
  return dir;
}

JobOutcome Run::Lost() {
  const bool canceled = state().lease == JobState::Lease::kCanceled;
  if (!canceled) Log("%s: lease lost; discarding local work", What().c_str());
  if (uploader_) uploader_->Abort();
  if (!replay()) state_dir_->ClearCurrentJob();
  files::RemoveTree(work_dir_);
  if (canceled && !replay()) RemoveJobCache();  // a voided replay: the job goes on
  return canceled ? JobOutcome::kCanceled : JobOutcome::kLost;
}

JobOutcome Run::Release(const std::string& reason) {
  if (replay()) return Drop(reason);
  if (uploader_ && !uploader_->Drain(std::max(0.1, SecondsLeft(sd_) - 1.0))) {
    Log("job %s: checkpoint upload not finished before the deadline", job_.job_id.c_str());
  }
  if (uploader_ && uploader_->lease_lost()) Apply(Event(JobEvent::Type::kLeaseRefused));
  if (!state().held()) return Lost();
  if (uploader_) sd_->board.Progress(step_, uploader_->last_committed());
  Apply(Event(JobEvent::Type::kFinishing));
  Status s = Retry(
      "release", [&] { return api_->Release(job_.job_id, job_.epoch, reason); },
      [this] { return GiveUp(); }, nullptr, 1.0);
  if (uploader_) uploader_->Abort();
  if (!s.ok() && s.code() != Code::kConflict) {
    Log("job %s: release failed: %s", job_.job_id.c_str(), s.ToString().c_str());
    return JobOutcome::kAbandoned;  // pending uploads stay recorded for the next start
  }
  state_dir_->ClearCurrentJob();
  Log("job %s: released at step %lld (last committed checkpoint %lld)", job_.job_id.c_str(),
      static_cast<long long>(step_.load()),
      static_cast<long long>(uploader_ ? uploader_->last_committed() : -1));
  return JobOutcome::kReleased;
}

JobOutcome Run::ReportFailure(const std::string& reason, FailCause cause) {
  if (replay()) return Drop(reason);
  Log("job %s: failed (%s): %s", job_.job_id.c_str(), FailCauseName(cause), reason.c_str());
  // Checkpoints already written help the next node: give them a moment.
  if (uploader_) uploader_->Drain(std::min(10.0, std::max(0.1, SecondsLeft(sd_) - 1.0)));
  if (uploader_) uploader_->Abort();
  Apply(Event(JobEvent::Type::kFinishing));
  Status s = Retry(
      "fail",
      [&] { return api_->Fail(job_.job_id, job_.epoch, reason.substr(0, 4000), cause, step_); },
      [this] { return GiveUp(); }, &sd_->stop);
  state_dir_->ClearCurrentJob();
  files::RemoveTree(work_dir_);
  if (s.code() == Code::kConflict) return Lost();
  if (s.ok()) RemoveJobCache();  // this machine never gets the job again (ban or input error)
  return JobOutcome::kFailed;
}

JobOutcome Run::Complete() {
  if (uploader_) {
    // The checkpoint of the last step supersedes any pending one before it, and must be
    // committed (with the outputs it exports to) before the job completes; the samples (the
    // final ones last) are part of the result, so they go up before it too.
    uploader_->DropCheckpointsBefore(job_.steps);
    while (!uploader_->Drain(0.2)) {
      Apply(Tick());
      if (GiveUp()) {  // the lease ran out (or the deadline came) while they were uploading
        Log("job %s: sample upload not finished in time", job_.job_id.c_str());
        break;
      }
    }
    if (uploader_->lease_lost()) Apply(Event(JobEvent::Type::kLeaseRefused));
    uploader_->Abort();
    if (!state().held()) return Lost();
  }
  std::string out_dir = train::OutputDirFor(work_dir_);
  Result<CheckpointManifest> m = train::VerifyCheckpointDir(out_dir);
  if (!m.ok()) {
    return ReportFailure("trainer output failed verification: " + m.status().message(),
                         FailCause::kNode);
  }
  std::vector<OutputFile> outputs;
  for (const ManifestFile& f : m->files) {
    std::string url;
    Status s = Retry(
        "output url " + f.name,
        [&] {
          Result<std::string> u = api_->CreateOutput(job_.job_id, job_.epoch, f.name, f.size);
          if (u.ok()) url = *u;
          return u.status();
        },
        [this] { return GiveUp(); }, nullptr);
    if (s.ok()) {
      s = Retry(
          "output upload " + f.name,
          [&] { return api_->PutFile(url, files::Join(out_dir, f.name)); },
          [this] { return GiveUp(); }, nullptr);
    }
    if (s.code() == Code::kConflict) {
      Apply(Event(JobEvent::Type::kLeaseRefused));
      return Lost();
    }
    if (!s.ok()) {
      Log("job %s: output %s not uploaded: %s", job_.job_id.c_str(), f.name.c_str(),
          s.ToString().c_str());
      return JobOutcome::kAbandoned;
    }
    outputs.push_back(f);
  }
  Apply(Event(JobEvent::Type::kFinishing));
  // The coordinator completes a job only once its last step is reported (the heartbeat thread
  // may not have sent the trainer's final step yet).
  Status s = Retry(
      "final heartbeat",
      [&] {
        double loss;
        bool has_loss;
        {
          std::lock_guard<std::mutex> lock(mu_);
          loss = loss_;
          has_loss = has_loss_;
        }
        return api_->Heartbeat(job_.job_id, job_.epoch, step_, loss, has_loss).status();
      },
      [this] { return GiveUp(); }, nullptr);
  if (s.ok()) {
    s = Retry(
        "complete", [&] { return api_->Complete(job_.job_id, job_.epoch, outputs); },
        [this] { return GiveUp(); }, nullptr);
  }
  if (s.code() == Code::kConflict) return Lost();
  if (!s.ok()) {
    Log("job %s: complete not accepted: %s", job_.job_id.c_str(), s.ToString().c_str());
    return JobOutcome::kAbandoned;
  }
  state_dir_->ClearCurrentJob();
  files::RemoveTree(work_dir_);
  RemoveJobCache();
  Log("job %s: completed (%zu output files)", job_.job_id.c_str(), outputs.size());
  return JobOutcome::kCompleted;
}

JobOutcome Run::Drop(const std::string& reason) {
  Log("%s: dropped, its lease lapses: %s", What().c_str(), reason.c_str());
  files::RemoveTree(work_dir_);
  return JobOutcome::kDropped;
}

JobOutcome Run::CommitReplay() {
  const std::string dir = train::CheckpointDirFor(work_dir_, job_.stop_step);
  const std::string archive = files::Join(work_dir_, "replay.gckpt");
  Result<CheckpointManifest> m = PackCheckpoint(dir, archive);
  if (m.ok() && m->step != job_.stop_step) m = Status::Corruption("it holds another step");
  if (!m.ok()) return Drop("the replayed checkpoint: " + m.status().message());
  // A replay of the last segment also exported the output: its files are committed too, and
  // must be the ones its checkpoint records.
  std::vector<OutputFile> outputs;
  if (job_.stop_step == job_.steps) {
    Result<std::vector<ManifestFile>> recorded = ManifestOutputs(*m);
    Result<CheckpointManifest> out = train::VerifyCheckpointDir(train::OutputDirFor(work_dir_));
    if (!recorded.ok()) return Drop("the replayed checkpoint: " + recorded.status().message());
    if (!out.ok()) return Drop("the replay's output: " + out.status().message());
    if (!SameFiles(*recorded, out->files)) {
      return Drop("the replay's output differs from the outputs its checkpoint records");
    }
    outputs = out->files;
  }
  Result<files::FileDigest> d = files::Digest(archive);
  if (!d.ok()) return Drop("the replayed checkpoint: " + d.status().message());
  auto give_up = [this] { return GiveUp(); };
  std::string url;
  Status s = Retry(
      "replay checkpoint url",
      [&] {
        Result<std::string> u = api_->VerificationCheckpointUrl(job_.verification_id, job_.epoch);
        if (u.ok()) url = *u;
        return u.status();
      },
      give_up, &sd_->stop);
  if (s.ok())
    s = Retry(
        "replay checkpoint upload", [&] { return api_->PutFile(url, archive); }, give_up,
        &sd_->stop);
  if (s.ok()) {
    // A retried commit of the same result is answered 200; a 409 from here on is the lease.
    Apply(Event(JobEvent::Type::kFinishing));
    s = Retry(
        "replay commit",
        [&] {
          return api_->VerificationCommit(job_.verification_id, job_.epoch, d->sha256, d->size,
                                          outputs);
        },
        give_up, &sd_->stop);
  }
  if (s.code() == Code::kConflict) {
    Apply(Event(JobEvent::Type::kLeaseRefused));
    return Lost();
  }
  if (!s.ok()) return Drop("the replayed checkpoint was not delivered: " + s.ToString());
  files::RemoveTree(work_dir_);
  Log("%s: committed the checkpoint of step %lld (sha256 %s)", What().c_str(),
      static_cast<long long>(job_.stop_step), d->sha256.c_str());
  return JobOutcome::kCompleted;
}

JobOutcome Run::Finish(int wait_status) {
  const JobState s = state();
  switch (s.verdict) {
    case JobState::Verdict::kDiscard:
      return Lost();
    case JobState::Verdict::kComplete:
      return replay() ? CommitReplay() : Complete();
    case JobState::Verdict::kDrop:
      return Drop(s.yielded ? YieldReason(true) : "trainer " + DescribeWaitStatus(wait_status));
    case JobState::Verdict::kRelease:
      return Release(YieldReason(s.yielded));
    case JobState::Verdict::kReleaseLate:
      return Release(YieldReason(true) + " (trainer did not checkpoint in time)");
    case JobState::Verdict::kFail:
    case JobState::Verdict::kNone:
      break;
  }
  std::string reason = "trainer " + DescribeWaitStatus(wait_status);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!error_reason_.empty()) reason += ": " + error_reason_;
    if (!stderr_tail_.empty()) {
      reason += "\nstderr:";
      for (const std::string& l : stderr_tail_) reason += "\n" + l;
    }
  }
  return ReportFailure(reason, FailCauseOfExit(wait_status));
}

int Run::Train(ChildProcess* child) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    child_ = child;
  }
  Apply(Event(JobEvent::Type::kTrainerStarted));
  sd_->board.TrainerStarted();
  int wait_status = 0;
  while (!child->WaitFor(100, &wait_status)) {
    sd_->board.Progress(step_, uploader_ ? uploader_->last_committed() : -1);
    // The heartbeat thread ends the lease on time; this also covers a heartbeat call that is
    // itself stuck past that moment, and hands the job back when asked.
    Apply(Tick());
  }
  sd_->board.TrainerStopped();
  {
    std::lock_guard<std::mutex> lock(mu_);
    child_ = nullptr;
  }
  if (uploader_ && uploader_->lease_lost()) Apply(Event(JobEvent::Type::kLeaseRefused));
  JobEvent exited = Event(JobEvent::Type::kTrainerExited);
  exited.exit_code = WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : -1;
  Apply(exited);
  return wait_status;
}

JobOutcome Run::Go() {
  Log("%s: epoch %lld, kind %s, %lld steps%s%s", What().c_str(), static_cast<long long>(job_.epoch),
      job_.kind.c_str(), static_cast<long long>(job_.steps),
      job_.resume ? (", resume from step " + std::to_string(job_.resume_step)).c_str() : "",
      replay() ? (", replay to step " + std::to_string(job_.stop_step)).c_str() : "");
  sd_->board.JobStarted(job_.job_id, job_.epoch, replay() ? job_.stop_step : job_.steps,
                        job_.resume_step);
  files::RemoveTree(work_dir_);
  Status s = files::MakeDirs(work_dir_, 0700);
  // Recorded for a restart, which releases the job; a replay's lease simply lapses.
  if (s.ok() && !replay()) s = state_dir_->SaveCurrentJob(CurrentJob{job_.job_id, job_.epoch, {}});
  if (!s.ok()) {
    Log("%s: cannot prepare the work directory: %s", What().c_str(), s.ToString().c_str());
    if (replay()) return Drop("node storage error");
    // Not the job's fault: hand it back.
    api_->Release(job_.job_id, job_.epoch, "node storage error");
    return JobOutcome::kReleased;
  }
  s = OpenJobCache(cache_dir_);
  cache_opened_ = s.ok();
  if (!s.ok()) {
    Log("job %s: job cache: %s (running without it)", job_.job_id.c_str(), s.ToString().c_str());
  }
  JobEvent claimed = Event(JobEvent::Type::kLeaseRenewed);
  if (job_.leased_at != Clock::time_point{}) claimed.at_s = Seconds(job_.leased_at);
  claimed.ttl_s = DefaultTtl();
  Apply(claimed);
  std::thread heartbeat([this] { HeartbeatLoop(); });
  struct Joiner {
    StopToken* stop;
    std::thread* t;
    ~Joiner() {
      stop->Request();
      t->join();
    }
  } joiner{&hb_stop_, &heartbeat};

  Json inputs = Json::object();
  s = PrepareInputs(&inputs);
  if (!state().held()) return Lost();
  if (!s.ok()) {
    if (IsTransient(s)) return Release("inputs unavailable: " + s.message());
    return ReportFailure(s.message(), FailCause::kInput);
  }
  std::string resume_dir = PrepareResume();
  if (!state().held()) return Lost();
  if (Yielding(sd_)) return Release(YieldReason(true));

  Json spec = {{"job_id", job_.job_id}, {"kind", job_.kind},   {"params", job_.params},
               {"inputs", inputs},      {"steps", job_.steps}, {"epoch", job_.epoch}};
  if (!job_.model.empty()) spec["model"] = job_.model;  // lora-sd reads model.config
  for (const RemoteObject& in : job_.inputs) {
    if (in.name == "model" && !in.path.empty()) spec["model"]["format"] = kModelFormatDiffusers;
  }
  std::string spec_path = files::Join(work_dir_, "SPEC.json");
  s = files::WriteDurable(spec_path, DumpJson(spec));
  if (!s.ok()) return Release("node storage error: " + s.message());

  if (!replay()) {
    uploader_.reset(new CheckpointUploader(api_, state_dir_, job_.job_id, job_.epoch, work_dir_,
                                           config_.keep_checkpoints));
  }
  std::vector<std::string> argv = {config_.trainer, "run",        "--spec",
                                   spec_path,       "--work-dir", work_dir_};
  if (replay()) {
    argv.push_back("--stop-at-step");
    argv.push_back(std::to_string(job_.stop_step));
  }
  if (!resume_dir.empty()) {
    argv.push_back("--resume");
    argv.push_back(resume_dir);
  }
  if (cache_opened_) {
    argv.push_back("--cache-dir");
    argv.push_back(cache_dir_);
  }
  // The trainer's memory budget and rlimits (trainer_env.h): what this node can give right now.
  GpuInfo gpu = DetectGpu(config_.owner.gpus);
  const TrainerLimits limits = TrainerLimitsFor(
      gpu.name, AdvertisedVramMb(gpu.vram_mb, config_.owner.max_vram_mb), DetectHostMemoryBytes());
  std::vector<std::string> env = TrainerEnvironment(environ);
  for (std::string& e : BudgetEnvironment(limits.budget)) env.push_back(std::move(e));
  Log("%s: trainer budget: RAM %lld MiB, VRAM %lld MiB%s", What().c_str(),
      static_cast<long long>(limits.budget.host_bytes >> 20),
      static_cast<long long>(limits.budget.device_bytes >> 20),
      limits.rlimits.data_bytes > 0 ? " (RLIMIT_DATA)" : "");
  Result<std::unique_ptr<ChildProcess>> child = ChildProcess::Start(
      argv, [this](const std::string& l) { OnStdout(l); },
      [this](const std::string& l) { OnStderr(l); }, &env, &limits.rlimits);
  if (!child.ok()) {
    return ReportFailure("cannot start the trainer: " + child.status().message(), FailCause::kNode);
  }
  int wait_status = Train(child->get());
  child->reset();
  return Finish(wait_status);
}

}  // namespace

FailCause FailCauseOfExit(int wait_status) {
  return WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == kExitFailed ? FailCause::kInput
                                                                           : FailCause::kNode;
}

JobOutcome RunJob(const AgentConfig& config, CoordinatorApi* api, StateDir* state, BlobCache* cache,
                  const Assignment& job, ShutdownState* shutdown) {
  Run run(config, api, state, cache, job, shutdown);
  JobOutcome o = run.Go();
  shutdown->board.JobEnded(o == JobOutcome::kCompleted);
  return o;
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
