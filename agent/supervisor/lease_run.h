// LeaseRun: what the life of one lease (job_runner.h) shares between its threads and its
// files: the lease's state machine (job_state.h) and the one place its actions are carried out,
// the heartbeat loop, and the trainer's progress as its stdout and stderr report it.
// The mainline (job_runner.cc) drives it; lease_prepare.h, lease_delivery.h and
// lease_recovery.h act on it.
//
// Ownership: RunJob owns the LeaseRun for one lease; it points at the caller's config, API
// client, state dir, cache and shutdown state, which outlive it. `job` is the lease's copy of
// the assignment: the preparation may update its URLs and drop its resume (mainline thread
// only, before the trainer starts); the heartbeat thread reads only its ids, epoch and timings,
// which never change.
//
// Threading: Apply, state(), Tick and the progress accessors are safe from any thread (mu_).
// HeartbeatLoop runs on its own thread until hb_stop is requested or the lease is settled;
// OnStdout / OnStderr run on the child's reader threads; everything else is the mainline's.
//
// Errors: nothing here fails; what the threads see becomes events, and the verdict is the state
// machine's.
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <mutex>
#include <string>

#include "agent/supervisor/api.h"
#include "agent/supervisor/cache.h"
#include "agent/supervisor/child_process.h"
#include "agent/supervisor/config.h"
#include "agent/supervisor/job_runner.h"
#include "agent/supervisor/job_state.h"
#include "agent/supervisor/state.h"
#include "agent/supervisor/stop.h"
#include "agent/supervisor/uploader.h"

namespace gleaner::agent {

using LeaseClock = std::chrono::steady_clock;

// The steady clock in seconds: the time every JobEvent carries.
double SteadySeconds(LeaseClock::time_point t);
double NowSeconds();
// Seconds to the shutdown's deadline (1e9 when no shutdown is asked).
double ShutdownSecondsLeft(const ShutdownState* sd);
// Time left to hand the job back: the shutdown's deadline or the owner controls' one.
double YieldSecondsLeft(const ShutdownState* sd);
// Shutting down, or the owner controls want the job back.
bool Yielding(const ShutdownState* sd);

class LeaseRun {
 public:
  LeaseRun(const AgentConfig& config, CoordinatorApi* api, StateDir* state, BlobCache* cache,
           const Assignment& job, ShutdownState* shutdown);

  // Every event goes through Apply: the state machine decides, and Apply carries out its
  // action. It is the one place that signals the trainer.
  void Apply(const JobEvent& e);
  JobEvent Event(JobEvent::Type type) const;
  // Time passes: the lease may end, a hand-back may ask the trainer to stop.
  JobEvent Tick() const;
  JobState state() const;
  // Retries stop when the lease is gone or the hand-back deadline is near.
  bool GiveUp() const { return ShouldGiveUp(state(), YieldSecondsLeft(sd)); }
  // The claim's lease as the first renewal (from when it was asked for).
  void StartLease();
  // The heartbeat thread's body: renews the lease on its cadence until hb_stop, a lost lease or
  // the final call.
  void HeartbeatLoop();
  // The child's lines: progress events (trainer_protocol.h) and stderr diagnostics.
  void OnStdout(const std::string& line);
  void OnStderr(const std::string& line);
  // The trainer being supervised (nullptr: none), for Apply's signals.
  void SetChild(ChildProcess* child);

  // The trainer's last step, and its loss when it reported one.
  void Progress(int64_t* step, double* loss, bool* has_loss) const;
  // "error: <its reason>" and the stderr tail, appended to a failure's reason.
  std::string TrainerDiagnostics() const;

  bool replay() const { return !job.verification_id.empty(); }
  // "job j_…" or "replay v_… of job j_…", for the log.
  std::string What() const;
  // The release reason when the trainer stopped with a checkpoint (asked by us or not).
  std::string YieldReason(bool asked) const;
  // The job has ended for this node (completed, failed, canceled): its cache goes too.
  void RemoveJobCache();

  const AgentConfig& config;
  CoordinatorApi* const api;
  StateDir* const state_dir;
  BlobCache* const cache;
  ShutdownState* const sd;
  Assignment job;
  std::string work_dir;
  const std::string cache_dir;  // job_cache.h
  bool cache_opened = false;    // else the trainer runs without --cache-dir
  std::atomic<int64_t> step{0};
  StopToken hb_stop;
  std::unique_ptr<CheckpointUploader> uploader;  // job leases only, once the trainer starts

 private:
  double LeaseSecondsLeft() const { return state().lease_end_s - NowSeconds(); }
  double DefaultTtl() const;
  Result<HeartbeatReply> SendHeartbeat(int timeout_ms);

  mutable std::mutex mu_;  // guards state_, child_, loss_, has_loss_, stderr_tail_, error_reason_
  JobState state_;
  ChildProcess* child_ = nullptr;
  double loss_ = 0;
  bool has_loss_ = false;
  std::deque<std::string> stderr_tail_;
  std::string error_reason_;
};

}  // namespace gleaner::agent
