#include "agent/supervisor/job_runner.h"

#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "agent/protocol/checkpoint_dir.h"
#include "agent/protocol/trainer_protocol.h"
#include "agent/supervisor/archive.h"
#include "agent/supervisor/child_process.h"
#include "agent/supervisor/log.h"
#include "agent/supervisor/retry.h"
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
  }
  return "?";
}

namespace {

using Clock = std::chrono::steady_clock;

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
        state_(state),
        cache_(cache),
        job_(job),
        sd_(shutdown),
        work_dir_(state->JobDir(job.job_id, job.epoch)) {}

  JobOutcome Go();

 private:
  // Gives up retrying when the lease is lost or the shutdown deadline is near.
  bool GiveUp() const { return lost_ || canceled_ || SecondsLeft(sd_) < 0.5; }
  void HeartbeatLoop();
  // The lease as this agent knows it: it ends lease_deadline_ (steady clock ticks), a margin
  // before it could expire on the coordinator. Past it, the trainer is stopped and the job is
  // treated as lost, so a partitioned agent never trains on a lease someone else may hold.
  double LeaseSecondsLeft() const;
  void ExtendLease(Clock::time_point asked_at, double ttl_s);
  void ExpireLease();
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
  JobOutcome Finish(int wait_status, bool interrupted_by_us);
  JobOutcome Complete();
  JobOutcome ReportFailure(const std::string& reason);
  JobOutcome Release(const std::string& reason);
  JobOutcome Lost();
  void KillTrainer(int sig);
  // The release reason when we stopped the trainer (or someone else did).
  std::string YieldReason(bool interrupted_by_us) const {
    if (sd_->stop.requested()) return "agent shutting down";
    if (sd_->hand_back.requested()) return "owner: " + sd_->hand_back.reason();
    return interrupted_by_us ? "agent shutting down" : "trainer interrupted";
  }

  const AgentConfig& config_;
  CoordinatorApi* api_;
  StateDir* state_;
  BlobCache* cache_;
  Assignment job_;
  ShutdownState* sd_;
  std::string work_dir_;

  std::atomic<int64_t> step_{0};
  std::mutex mu_;  // guards loss_, stderr_tail_, error_reason_, child_
  double loss_ = 0;
  bool has_loss_ = false;
  std::deque<std::string> stderr_tail_;
  std::string error_reason_;
  ChildProcess* child_ = nullptr;
  std::atomic<bool> lost_{false}, canceled_{false};
  std::atomic<Clock::rep> lease_deadline_{0};
  // Set before the final complete/fail/release call: a 409 from a heartbeat racing it is the
  // coordinator having accepted that call, not a lost lease.
  std::atomic<bool> finishing_{false};
  StopToken hb_stop_;
  std::unique_ptr<CheckpointUploader> uploader_;
};

void Run::KillTrainer(int sig) {
  std::lock_guard<std::mutex> lock(mu_);
  if (child_ != nullptr) child_->Signal(sig);
}

double Run::LeaseSecondsLeft() const {
  return std::chrono::duration<double>(Clock::time_point(Clock::duration(lease_deadline_)) -
                                       Clock::now())
      .count();
}

void Run::ExtendLease(Clock::time_point asked_at, double ttl_s) {
  // Stop a little before the lease ends: the trainer must be dead before anyone else may claim
  // the job (the kill, and the coordinator's claim, take a moment).
  const double margin = std::min(2.0, ttl_s / 4);
  lease_deadline_ =
      std::chrono::duration_cast<Clock::duration>(
          (asked_at + std::chrono::duration<double>(ttl_s - margin)).time_since_epoch())
          .count();
}

void Run::ExpireLease() {
  if (lost_.exchange(true)) return;
  Log("job %s: no heartbeat accepted in time and the lease is about to expire: lease lost, "
      "stopping the trainer",
      job_.job_id.c_str());
  KillTrainer(SIGKILL);
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
    if (finishing_) return;
    if (LeaseSecondsLeft() <= 0) return ExpireLease();
    double loss;
    bool has_loss;
    {
      std::lock_guard<std::mutex> lock(mu_);
      loss = loss_;
      has_loss = has_loss_;
    }
    const Clock::time_point asked_at = Clock::now();
    // Never wait for a reply past the lease's end, and leave time for a retry when the
    // lease allows it (a call stuck on a dead connection must not use up the whole lease).
    const double left = LeaseSecondsLeft();
    const int timeout_ms = int(
        1000 * std::clamp(std::min(left, std::max(1.0, std::min(interval, left / 2))), 0.1, 30.0));
    Result<HeartbeatReply> r =
        api_->Heartbeat(job_.job_id, job_.epoch, step_, loss, has_loss, timeout_ms);
    if (finishing_) return;
    if (!r.ok()) {
      if (r.status().code() == Code::kConflict) {
        Log("job %s: heartbeat refused (%s): lease lost, stopping the trainer", job_.job_id.c_str(),
            r.status().message().c_str());
        lost_ = true;
        KillTrainer(SIGKILL);
        return;
      }
      Log("job %s: heartbeat failed: %s", job_.job_id.c_str(), r.status().ToString().c_str());
      wait = retry;
      continue;
    }
    if (r->cancel) {
      Log("job %s: canceled by the coordinator, stopping the trainer", job_.job_id.c_str());
      canceled_ = true;
      KillTrainer(SIGKILL);
      return;
    }
    ExtendLease(asked_at, r->ttl_s > 0 ? r->ttl_s : DefaultTtl());
    wait =
        std::max(0.0, cadence() - std::chrono::duration<double>(Clock::now() - asked_at).count());
  }
}

void Run::OnStdout(const std::string& line) {
  Result<ProgressEvent> e = ParseProgressEvent(line);
  if (!e.ok()) {
    if (e.status().code() != Code::kNotFound) {
      Log("job %s: bad progress line: %s", job_.job_id.c_str(), e.status().message().c_str());
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
    case ProgressEvent::Type::kDone:
      step_ = e->step;
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
  if (s.code() != Code::kPermissionDenied) return s;
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
    Log("job %s: fresh URLs refused (%s): lease lost", job_.job_id.c_str(),
        asked.message().c_str());
    lost_ = true;
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
  for (RemoteObject& in : job_.inputs) {
    std::string path;
    Status s = Download("input " + in.name, &in, [&](const RemoteObject& o) {
      Result<std::string> p = cache_->Fetch(api_, o);
      if (p.ok()) path = *p;
      return p.status();
    });
    if (!s.ok()) return Status(s.code(), "input " + in.name + ": " + s.message());
    (*inputs)[in.name] = path;
    keep.insert(path);
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
  if (!s.ok() && (sd_->stop.requested() || lost_ || canceled_)) return "";  // Go() stops next
  if (!s.ok()) {
    Log("job %s: resume checkpoint step %lld failed verification (%s); starting from scratch",
        job_.job_id.c_str(), static_cast<long long>(job_.resume_step), s.ToString().c_str());
    job_.resume.reset();
    job_.resume_step = 0;
    files::RemoveTree(dir);
    return "";
  }
  Log("job %s: resuming from checkpoint step %lld (sha256 verified)", job_.job_id.c_str(),
      static_cast<long long>(job_.resume_step));
  return dir;
}

JobOutcome Run::Lost() {
  if (!canceled_) Log("job %s: lease lost; discarding local work", job_.job_id.c_str());
  if (uploader_) uploader_->Abort();
  state_->ClearCurrentJob();
  files::RemoveTree(work_dir_);
  return canceled_ ? JobOutcome::kCanceled : JobOutcome::kLost;
}

JobOutcome Run::Release(const std::string& reason) {
  if (uploader_ && !uploader_->Drain(std::max(0.1, SecondsLeft(sd_) - 1.0))) {
    Log("job %s: checkpoint upload not finished before the deadline", job_.job_id.c_str());
  }
  if (uploader_ && uploader_->lease_lost()) return Lost();
  if (uploader_) sd_->board.Progress(step_, uploader_->last_committed());
  finishing_ = true;
  Status s = Retry(
      "release", [&] { return api_->Release(job_.job_id, job_.epoch, reason); },
      [this] { return GiveUp(); }, nullptr, 1.0);
  if (uploader_) uploader_->Abort();
  if (!s.ok() && s.code() != Code::kConflict) {
    Log("job %s: release failed: %s", job_.job_id.c_str(), s.ToString().c_str());
    return JobOutcome::kAbandoned;  // pending uploads stay recorded for the next start
  }
  state_->ClearCurrentJob();
  Log("job %s: released at step %lld (last committed checkpoint %lld)", job_.job_id.c_str(),
      static_cast<long long>(step_.load()),
      static_cast<long long>(uploader_ ? uploader_->last_committed() : -1));
  return JobOutcome::kReleased;
}

JobOutcome Run::ReportFailure(const std::string& reason) {
  Log("job %s: failed: %s", job_.job_id.c_str(), reason.c_str());
  // Checkpoints already written help the next node: give them a moment.
  if (uploader_) uploader_->Drain(std::min(10.0, std::max(0.1, SecondsLeft(sd_) - 1.0)));
  if (uploader_) uploader_->Abort();
  finishing_ = true;
  Status s = Retry(
      "fail", [&] { return api_->Fail(job_.job_id, job_.epoch, reason.substr(0, 4000)); },
      [this] { return GiveUp(); }, &sd_->stop);
  state_->ClearCurrentJob();
  files::RemoveTree(work_dir_);
  if (s.code() == Code::kConflict) return Lost();
  return JobOutcome::kFailed;
}

JobOutcome Run::Complete() {
  if (uploader_) uploader_->Abort();  // the result supersedes any pending checkpoint
  std::string out_dir = train::OutputDirFor(work_dir_);
  Result<CheckpointManifest> m = train::VerifyCheckpointDir(out_dir);
  if (!m.ok()) return ReportFailure("trainer output failed verification: " + m.status().message());
  std::vector<OutputFile> outputs;
  for (const ManifestFile& f : m->files) {
    std::string url;
    Status s = Retry(
        "output url " + f.name,
        [&] {
          Result<std::string> u = api_->CreateOutput(job_.job_id, job_.epoch, f.name);
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
    if (s.code() == Code::kConflict) return Lost();
    if (!s.ok()) {
      Log("job %s: output %s not uploaded: %s", job_.job_id.c_str(), f.name.c_str(),
          s.ToString().c_str());
      return JobOutcome::kAbandoned;
    }
    outputs.push_back(OutputFile{f.name, f.sha256, f.size});
  }
  finishing_ = true;
  Status s = Retry(
      "complete", [&] { return api_->Complete(job_.job_id, job_.epoch, outputs); },
      [this] { return GiveUp(); }, nullptr);
  if (s.code() == Code::kConflict) return Lost();
  if (!s.ok()) {
    Log("job %s: complete not accepted: %s", job_.job_id.c_str(), s.ToString().c_str());
    return JobOutcome::kAbandoned;
  }
  state_->ClearCurrentJob();
  files::RemoveTree(work_dir_);
  Log("job %s: completed (%zu output files)", job_.job_id.c_str(), outputs.size());
  return JobOutcome::kCompleted;
}

JobOutcome Run::Finish(int wait_status, bool interrupted_by_us) {
  if (lost_ || canceled_ || (uploader_ && uploader_->lease_lost())) return Lost();
  if (WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == kExitDone) return Complete();
  if (WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == kExitInterrupted) {
    // Interrupted with a checkpoint: by us, or by a signal sent to every process of the
    // service at once. Never the job's fault.
    return Release(YieldReason(interrupted_by_us));
  }
  if (interrupted_by_us && Yielding(sd_) && !WIFEXITED(wait_status)) {
    return Release(YieldReason(true) + " (trainer did not checkpoint in time)");
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
  return ReportFailure(reason);
}

JobOutcome Run::Go() {
  Log("job %s: epoch %lld, kind %s, %lld steps%s", job_.job_id.c_str(),
      static_cast<long long>(job_.epoch), job_.kind.c_str(), static_cast<long long>(job_.steps),
      job_.resume ? (", resume from step " + std::to_string(job_.resume_step)).c_str() : "");
  sd_->board.JobStarted(job_.job_id, job_.epoch, job_.steps, job_.resume_step);
  files::RemoveTree(work_dir_);
  Status s = files::MakeDirs(work_dir_, 0700);
  if (s.ok()) s = state_->SaveCurrentJob(CurrentJob{job_.job_id, job_.epoch, {}});
  if (!s.ok()) {
    Log("job %s: cannot prepare the work directory: %s", job_.job_id.c_str(), s.ToString().c_str());
    // Not the job's fault: hand it back.
    api_->Release(job_.job_id, job_.epoch, "node storage error");
    return JobOutcome::kReleased;
  }
  ExtendLease(job_.leased_at == Clock::time_point{} ? Clock::now() : job_.leased_at, DefaultTtl());
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
  if (lost_ || canceled_) return Lost();
  if (!s.ok()) {
    if (IsTransient(s)) return Release("inputs unavailable: " + s.message());
    return ReportFailure(s.message());
  }
  std::string resume_dir = PrepareResume();
  if (lost_ || canceled_) return Lost();
  if (Yielding(sd_)) return Release(YieldReason(true));

  Json spec = {{"job_id", job_.job_id}, {"kind", job_.kind},   {"params", job_.params},
               {"inputs", inputs},      {"steps", job_.steps}, {"epoch", job_.epoch}};
  if (!job_.model.empty()) spec["model"] = job_.model;  // lora-sd reads model.config
  std::string spec_path = files::Join(work_dir_, "SPEC.json");
  s = files::WriteDurable(spec_path, DumpJson(spec));
  if (!s.ok()) return Release("node storage error: " + s.message());

  uploader_.reset(new CheckpointUploader(api_, state_, job_.job_id, job_.epoch, work_dir_,
                                         config_.keep_checkpoints));
  std::vector<std::string> argv = {config_.trainer, "run",        "--spec",
                                   spec_path,       "--work-dir", work_dir_};
  if (!resume_dir.empty()) {
    argv.push_back("--resume");
    argv.push_back(resume_dir);
  }
  Result<std::unique_ptr<ChildProcess>> child = ChildProcess::Start(
      argv, [this](const std::string& l) { OnStdout(l); },
      [this](const std::string& l) { OnStderr(l); });
  if (!child.ok()) return ReportFailure("cannot start the trainer: " + child.status().message());
  {
    std::lock_guard<std::mutex> lock(mu_);
    child_ = child->get();
  }
  sd_->board.TrainerStarted();
  bool forwarded = false, killed = false;
  int wait_status = 0;
  while (!(*child)->WaitFor(100, &wait_status)) {
    sd_->board.Progress(step_, uploader_->last_committed());
    // The heartbeat thread stops the trainer when the lease runs out; this covers a heartbeat
    // call that is itself stuck past that moment.
    if (!lost_ && LeaseSecondsLeft() <= 0) ExpireLease();
    if (Yielding(sd_) && !forwarded) {
      Log("job %s: %s: asking the trainer to checkpoint", job_.job_id.c_str(),
          sd_->stop.requested() ? "shutdown requested" : "handing the job back");
      (*child)->Signal(SIGTERM);
      forwarded = true;
    }
    if (forwarded && !killed && SecondsLeft(sd_) < 2.0) {
      Log("job %s: trainer did not stop in time: killing it", job_.job_id.c_str());
      (*child)->Signal(SIGKILL);
      killed = true;
    }
  }
  sd_->board.TrainerStopped();
  {
    std::lock_guard<std::mutex> lock(mu_);
    child_ = nullptr;
  }
  child->reset();
  return Finish(wait_status, forwarded);
}

}  // namespace

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
  // Only a shutdown cuts recovery short (not the owner controls: the job is released anyway).
  auto give_up = [shutdown] { return ShutdownSecondsLeft(shutdown) < 0.5; };
  bool lost = false;
  for (const PendingUpload& p : job.pending) {
    if (lost) break;
    Result<files::FileDigest> d = files::Digest(p.archive);
    if (!d.ok() || d->sha256 != p.sha256 || d->size != p.size) {
      Log("job %s: pending checkpoint %lld is damaged on disk; dropping it", job.job_id.c_str(),
          static_cast<long long>(p.step));
      continue;
    }
    std::string url;
    Status s = Retry(
        "checkpoint url",
        [&] {
          Result<std::string> u = api->CreateCheckpoint(job.job_id, job.epoch, p.step);
          if (u.ok()) url = *u;
          return u.status();
        },
        give_up, &shutdown->stop);
    if (s.ok()) {
      s = Retry(
          "checkpoint upload", [&] { return api->PutFile(url, p.archive); }, give_up,
          &shutdown->stop);
    }
    if (s.ok()) {
      s = Retry(
          "checkpoint commit",
          [&] { return api->CommitCheckpoint(job.job_id, job.epoch, p.step, p.sha256, p.size); },
          give_up, &shutdown->stop);
    }
    if (s.code() == Code::kConflict) {
      Log("job %s: lease no longer held; dropping pending uploads", job.job_id.c_str());
      lost = true;
    } else if (s.ok()) {
      Log("job %s: pending checkpoint step %lld committed", job.job_id.c_str(),
          static_cast<long long>(p.step));
    }
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
