#include "agent/supervisor/status_board.h"

#include <cstdio>

#include "agent/supervisor/log.h"
#include "shared/native/files.h"

namespace gleaner::agent {

std::optional<double> EstimateEtaSeconds(int64_t first_step, double first_t, int64_t step, double t,
                                         int64_t steps) {
  if (step <= first_step || t <= first_t || steps <= 0) return std::nullopt;
  double rate = double(step - first_step) / (t - first_t);
  return double(std::max<int64_t>(0, steps - step)) / rate;
}

Status StatusBoard::AttachLifetime(const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  lifetime_path_ = path;
  Result<std::string> text = files::ReadAll(path, 1 << 16);
  if (!text.ok()) {
    return text.status().code() == Code::kNotFound ? Status::Ok() : text.status();
  }
  Result<Json> j = ParseJson(*text);
  if (!j.ok()) return Status::Corruption("lifetime.json: " + j.status().message());
  FieldReader f(*j, "lifetime.");
  f.Int("jobs", &jobs_, true, 0, int64_t(1) << 50);
  f.Int("jobs_completed", &jobs_completed_, true, 0, int64_t(1) << 50);
  f.Number("gpu_seconds", &gpu_seconds_, true, 0, 1e15);
  if (!f.ok()) return Status::Corruption(f.status().message());
  return Status::Ok();
}

Status StatusBoard::SaveLocked() {
  if (lifetime_path_.empty()) return Status::Ok();
  Json j = {{"jobs", jobs_}, {"jobs_completed", jobs_completed_}, {"gpu_seconds", gpu_seconds_}};
  return files::WriteDurable(lifetime_path_, DumpJson(j), 0600);
}

void StatusBoard::SetNode(const std::string& node_id) {
  std::lock_guard<std::mutex> lock(mu_);
  node_id_ = node_id;
}

void StatusBoard::SetBlocked(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  blocked_ = reason;
}

void StatusBoard::JobStarted(const std::string& job_id, int64_t epoch, int64_t steps,
                             int64_t resume_step) {
  std::lock_guard<std::mutex> lock(mu_);
  has_job_ = true;
  job_id_ = job_id;
  epoch_ = epoch;
  steps_ = steps;
  step_ = resume_step;
  trainer_since_.reset();
  trainer_seconds_ = 0;
  first_progress_.reset();
}

void StatusBoard::TrainerStarted() {
  std::lock_guard<std::mutex> lock(mu_);
  trainer_since_ = Clock::now();
}

void StatusBoard::TrainerStopped() {
  std::lock_guard<std::mutex> lock(mu_);
  trainer_seconds_ = TrainerSecondsLocked(Clock::now());
  trainer_since_.reset();
}

double StatusBoard::TrainerSecondsLocked(Clock::time_point now) const {
  double s = trainer_seconds_;
  if (trainer_since_) s += std::chrono::duration<double>(now - *trainer_since_).count();
  return s;
}

void StatusBoard::Progress(int64_t step, int64_t last_committed_step) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!has_job_) return;
  Clock::time_point now = Clock::now();
  if (step > step_ && !first_progress_) first_progress_ = std::make_pair(now, step_);
  step_ = std::max(step_, step);
  if (last_committed_step >= 0 && (ckpt_job_ != job_id_ || last_committed_step != ckpt_step_)) {
    ckpt_job_ = job_id_;
    ckpt_step_ = last_committed_step;
    ckpt_at_ = now;
  }
}

void StatusBoard::JobEnded(bool completed) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!has_job_) return;
  gpu_seconds_ += TrainerSecondsLocked(Clock::now());
  ++jobs_;
  if (completed) ++jobs_completed_;
  has_job_ = false;
  trainer_since_.reset();
  Status s = SaveLocked();
  if (!s.ok()) Log("lifetime counters not saved: %s", s.ToString().c_str());
}

Json StatusBoard::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  Clock::time_point now = Clock::now();
  Json j = Json::object();
  j["node_id"] = node_id_;
  j["reason"] = blocked_;
  j["job"] = nullptr;
  double gpu_s = gpu_seconds_;
  if (has_job_) {
    Json job = {{"id", job_id_}, {"epoch", epoch_}, {"step", step_}, {"steps", steps_}};
    job["eta_s"] = nullptr;
    if (first_progress_) {
      double t0 = std::chrono::duration<double>(first_progress_->first.time_since_epoch()).count();
      double t = std::chrono::duration<double>(now.time_since_epoch()).count();
      std::optional<double> eta = EstimateEtaSeconds(first_progress_->second, t0, step_, t, steps_);
      if (eta) job["eta_s"] = *eta;
    }
    j["job"] = job;
    gpu_s += TrainerSecondsLocked(now);
  }
  j["state"] = has_job_ ? (blocked_.empty() ? "working" : "handing back")
                        : (blocked_.empty() ? "idle" : "not working");
  j["last_checkpoint"] = nullptr;
  if (ckpt_step_ >= 0) {
    j["last_checkpoint"] = {{"job", ckpt_job_},
                            {"step", ckpt_step_},
                            {"age_s", std::chrono::duration<double>(now - ckpt_at_).count()}};
  }
  j["lifetime"] = {
      {"jobs", jobs_}, {"jobs_completed", jobs_completed_}, {"gpu_hours", gpu_s / 3600.0}};
  return j;
}

namespace {

std::string Duration(double s) {
  char buf[48];
  if (s < 90) {
    std::snprintf(buf, sizeof buf, "%.0fs", s);
  } else if (s < 5400) {
    std::snprintf(buf, sizeof buf, "%.0fm %02.0fs", double(int64_t(s) / 60),
                  double(int64_t(s) % 60));
  } else {
    std::snprintf(buf, sizeof buf, "%.0fh %02.0fm", double(int64_t(s) / 3600),
                  double(int64_t(s) % 3600 / 60));
  }
  return buf;
}

std::string Str(const Json& j, const char* k) {
  auto it = j.find(k);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

double Num(const Json& j, const char* k) {
  auto it = j.find(k);
  return it != j.end() && it->is_number() ? it->get<double>() : 0;
}

}  // namespace

std::string FormatStatus(const Json& s) {
  std::string out = "state: " + Str(s, "state");
  if (!Str(s, "reason").empty()) out += " (" + Str(s, "reason") + ")";
  out += "\n";
  auto paused = s.find("paused");
  if (paused != s.end() && paused->is_boolean() && paused->get<bool>()) {
    out += "paused: `gleaner-agent resume` takes work again\n";
  }
  if (!Str(s, "node_id").empty()) out += "node: " + Str(s, "node_id") + "\n";
  char buf[256];
  auto job = s.find("job");
  if (job != s.end() && job->is_object()) {
    std::snprintf(buf, sizeof buf, "job: %s (lease %.0f), step %.0f/%.0f", Str(*job, "id").c_str(),
                  Num(*job, "epoch"), Num(*job, "step"), Num(*job, "steps"));
    out += buf;
    auto eta = job->find("eta_s");
    out += eta != job->end() && eta->is_number() ? ", ETA " + Duration(eta->get<double>()) : "";
    out += "\n";
  } else {
    out += "job: none\n";
  }
  auto ck = s.find("last_checkpoint");
  if (ck != s.end() && ck->is_object()) {
    std::snprintf(buf, sizeof buf, "last checkpoint uploaded: %s step %.0f, %s ago\n",
                  Str(*ck, "job").c_str(), Num(*ck, "step"), Duration(Num(*ck, "age_s")).c_str());
    out += buf;
  } else {
    out += "last checkpoint uploaded: none yet\n";
  }
  auto life = s.find("lifetime");
  if (life != s.end() && life->is_object()) {
    std::snprintf(buf, sizeof buf, "lifetime: %.0f jobs (%.0f completed), %.2f GPU hours\n",
                  Num(*life, "jobs"), Num(*life, "jobs_completed"), Num(*life, "gpu_hours"));
    out += buf;
  }
  return out;
}

}  // namespace gleaner::agent
