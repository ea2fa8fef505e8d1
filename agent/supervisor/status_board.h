// What the running agent is doing, for `gleaner-agent status`: the current job (step/steps,
// ETA, last checkpoint uploaded), the owner controls' verdict, and lifetime counters (jobs, GPU
// hours) kept durably in the state dir (lifetime.json) across restarts and updates.
//
// The job runner reports into it; the control socket reads Snapshot(). Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

#include "shared/json.h"
#include "shared/status.h"

namespace gleaner::agent {

class StatusBoard {
 public:
  // Loads the lifetime counters from `path` (missing = zeros); later changes are saved there.
  Status AttachLifetime(const std::string& path);
  void SetNode(const std::string& node_id);
  // The owner controls' verdict: "" = allowed, else why the agent does not work.
  void SetBlocked(const std::string& reason);

  void JobStarted(const std::string& job_id, int64_t epoch, int64_t steps, int64_t resume_step);
  void TrainerStarted();  // GPU time counts from here ...
  void TrainerStopped();  // ... to here
  void Progress(int64_t step, int64_t last_committed_step);
  // Adds the job to the lifetime counters (completed ones separately) and saves them.
  void JobEnded(bool completed);

  // {"state", "reason", "node_id", "job": {id, epoch, step, steps, eta_s}|null,
  //  "last_checkpoint": {job, step, age_s}|null, "lifetime": {jobs, jobs_completed, gpu_hours}}
  Json Snapshot() const;

 private:
  using Clock = std::chrono::steady_clock;
  Status SaveLocked();
  double TrainerSecondsLocked(Clock::time_point now) const;

  mutable std::mutex mu_;
  std::string lifetime_path_, node_id_, blocked_;
  int64_t jobs_ = 0, jobs_completed_ = 0;
  double gpu_seconds_ = 0;
  // Current job.
  bool has_job_ = false;
  std::string job_id_;
  int64_t epoch_ = 0, steps_ = 0, step_ = 0;
  std::optional<Clock::time_point> trainer_since_;
  double trainer_seconds_ = 0;  // this job, finished trainer runs
  std::optional<std::pair<Clock::time_point, int64_t>> first_progress_;
  // Last checkpoint committed (kept after the job ends).
  std::string ckpt_job_;
  int64_t ckpt_step_ = -1;
  Clock::time_point ckpt_at_;
};

// Seconds left at the rate seen since the first progress report; nullopt without a rate.
std::optional<double> EstimateEtaSeconds(int64_t first_step, double first_t, int64_t step, double t,
                                         int64_t steps);

// The snapshot as a few lines for people.
std::string FormatStatus(const Json& snapshot);

}  // namespace gleaner::agent
