#include "agent/supervisor/lease_run.h"

#include <signal.h>

#include <algorithm>

#include "agent/protocol/trainer_protocol.h"
#include "agent/supervisor/log.h"
#include "shared/native/files.h"

namespace gleaner::agent {

double SteadySeconds(LeaseClock::time_point t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

double NowSeconds() {
  return SteadySeconds(LeaseClock::now());
}

double ShutdownSecondsLeft(const ShutdownState* sd) {
  if (!sd->stop.requested()) return 1e9;
  return std::chrono::duration<double>(sd->deadline - LeaseClock::now()).count();
}

double YieldSecondsLeft(const ShutdownState* sd) {
  return std::min(ShutdownSecondsLeft(sd), sd->hand_back.SecondsLeft());
}

bool Yielding(const ShutdownState* sd) {
  return sd->stop.requested() || sd->hand_back.requested();
}

LeaseRun::LeaseRun(const AgentConfig& config, CoordinatorApi* api, StateDir* state,
                   BlobCache* cache, const Assignment& job, ShutdownState* shutdown)
    : config(config),
      api(api),
      state_dir(state),
      cache(cache),
      sd(shutdown),
      job(job),
      work_dir(state->JobDir(job.job_id, job.epoch)),
      cache_dir(state->JobCacheDir(job.job_id)) {
  if (!job.verification_id.empty()) state_.work = JobState::Work::kReplay;
  // A replay's work dir is its own (the verification's epoch is not the job's).
  if (state_.replay()) work_dir = state->JobDir(job.verification_id, job.epoch);
}

void LeaseRun::Apply(const JobEvent& e) {
  std::lock_guard<std::mutex> lock(mu_);
  JobStep s = Step(state_, e);
  state_ = s.state;
  if (!s.why.empty()) {
    const char* context = "";
    if (s.action == TrainerAction::kCheckpoint) {
      context = sd->stop.requested() ? "shutdown requested: " : "handing the job back: ";
    }
    Log("%s: %s%s", What().c_str(), context, s.why.c_str());
  }
  if (s.action != TrainerAction::kNone && child_ != nullptr) {
    child_->Signal(s.action == TrainerAction::kKill ? SIGKILL : SIGTERM);
  }
}

JobEvent LeaseRun::Event(JobEvent::Type type) const {
  JobEvent e;
  e.type = type;
  e.at_s = NowSeconds();
  return e;
}

JobEvent LeaseRun::Tick() const {
  JobEvent e = Event(JobEvent::Type::kTick);
  e.yielding = Yielding(sd);
  e.yield_seconds_left = YieldSecondsLeft(sd);
  return e;
}

JobState LeaseRun::state() const {
  std::lock_guard<std::mutex> lock(mu_);
  return state_;
}

void LeaseRun::SetChild(ChildProcess* child) {
  std::lock_guard<std::mutex> lock(mu_);
  child_ = child;
}

double LeaseRun::DefaultTtl() const {
  return job.lease_ttl_s > 0 ? job.lease_ttl_s : 2 * job.heartbeat_interval_s;
}

void LeaseRun::StartLease() {
  JobEvent claimed = Event(JobEvent::Type::kLeaseRenewed);
  if (job.leased_at != LeaseClock::time_point{}) claimed.at_s = SteadySeconds(job.leased_at);
  claimed.ttl_s = DefaultTtl();
  Apply(claimed);
}

Result<HeartbeatReply> LeaseRun::SendHeartbeat(int timeout_ms) {
  if (replay()) {
    return api->VerificationHeartbeat(job.verification_id, job.epoch, step, timeout_ms);
  }
  int64_t at = 0;
  double loss = 0;
  bool has_loss = false;
  Progress(&at, &loss, &has_loss);
  return api->Heartbeat(job.job_id, job.epoch, at, loss, has_loss, timeout_ms);
}

void LeaseRun::HeartbeatLoop() {
  const double interval =
      config.heartbeat_override_s > 0 ? config.heartbeat_override_s : job.heartbeat_interval_s;
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
    if (hb_stop.WaitFor(std::max(0.0, std::min(wait, LeaseSecondsLeft())))) return;
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
    wait = std::max(0.0, cadence() - (NowSeconds() - renewed.at_s));
  }
}

void LeaseRun::OnStdout(const std::string& line) {
  Result<ProgressEvent> e = ParseProgressEvent(line);
  if (!e.ok()) {
    if (e.status().code() != Code::kNotFound) {
      Log("%s: bad progress line: %s", What().c_str(), e.status().message().c_str());
    }
    return;
  }
  switch (e->type) {
    case ProgressEvent::Type::kProgress: {
      step = e->step;
      std::lock_guard<std::mutex> lock(mu_);
      loss_ = e->loss;
      has_loss_ = e->has_loss;
      break;
    }
    case ProgressEvent::Type::kCheckpoint:
      if (e->step > job.resume_step || !job.resume) {
        if (uploader != nullptr) uploader->Enqueue(e->step, e->dir);
      }
      break;
    case ProgressEvent::Type::kSamples:
      if (uploader != nullptr) uploader->EnqueueSamples(e->step, e->dir);
      break;
    case ProgressEvent::Type::kDone:
      step = e->step;
      break;
    case ProgressEvent::Type::kClassImages:
      Log("job %s: %lld class images rendered in %.1f s", job.job_id.c_str(),
          static_cast<long long>(e->count), e->seconds);
      break;
    case ProgressEvent::Type::kError: {
      std::lock_guard<std::mutex> lock(mu_);
      error_reason_ = e->reason;
      break;
    }
  }
}

void LeaseRun::OnStderr(const std::string& line) {
  std::lock_guard<std::mutex> lock(mu_);
  stderr_tail_.push_back(line.substr(0, 500));
  while (stderr_tail_.size() > 20) stderr_tail_.pop_front();
}

void LeaseRun::Progress(int64_t* at, double* loss, bool* has_loss) const {
  *at = step;
  std::lock_guard<std::mutex> lock(mu_);
  *loss = loss_;
  *has_loss = has_loss_;
}

std::string LeaseRun::TrainerDiagnostics() const {
  std::string out;
  std::lock_guard<std::mutex> lock(mu_);
  if (!error_reason_.empty()) out += ": " + error_reason_;
  if (!stderr_tail_.empty()) {
    out += "\nstderr:";
    for (const std::string& l : stderr_tail_) out += "\n" + l;
  }
  return out;
}

std::string LeaseRun::What() const {
  return job.verification_id.empty() ? "job " + job.job_id
                                     : "replay " + job.verification_id + " of job " + job.job_id;
}

std::string LeaseRun::YieldReason(bool asked) const {
  if (sd->stop.requested()) return "agent shutting down";
  if (sd->hand_back.requested()) return "owner: " + sd->hand_back.reason();
  return asked ? "agent shutting down" : "trainer interrupted";
}

void LeaseRun::RemoveJobCache() {
  Status s = files::RemoveTree(cache_dir);
  if (!s.ok()) Log("job %s: job cache: %s", job.job_id.c_str(), s.ToString().c_str());
}

}  // namespace gleaner::agent
