// Applies the owner controls to the running agent: a thread re-reads the world every
// check_interval_s (owner_readings.h), asks the policy (owner_policy.h) and
//   - while work is not allowed, asks the running job to be handed back (HandBack: checkpoint,
//     upload, release — the agent keeps running) and keeps the main loop from claiming work;
//   - records the verdict on the status board.
// The owner's pause flag is kept durably in <state dir>/owner.json, so a pause survives a
// restart. SetPaused re-evaluates at once. Temperature flapping is damped by the policy's
// hysteresis; every other control is re-checked once per interval.
//
// Threading: one internal thread; every method is thread-safe. The destructor stops the thread.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "agent/supervisor/owner_policy.h"
#include "agent/supervisor/owner_readings.h"
#include "agent/supervisor/status_board.h"
#include "agent/supervisor/stop.h"

namespace gleaner::agent {

class OwnerGate {
 public:
  // hand_back_deadline_s: how long a job being handed back gets (the shutdown deadline).
  OwnerGate(OwnerControls controls, std::unique_ptr<OwnerReadingSource> source,
            std::string owner_file, StatusBoard* board, HandBack* hand_back,
            double hand_back_deadline_s);
  ~OwnerGate();
  // Loads the pause flag, evaluates once and starts the thread.
  Status Start();
  // Blocks until work is allowed (true) or `stop` is requested (false).
  bool WaitAllowed(const StopToken& stop);
  OwnerDecision decision() const;
  bool paused() const;
  // Persists the pause flag and re-evaluates now (a pause hands the running job back).
  Status SetPaused(bool paused);
  // Answers a control-socket command ("status", "pause", "resume") with one JSON line.
  std::string HandleCommand(const std::string& command);

 private:
  void Loop();
  void EvaluateNow();  // reads, decides, publishes (thread of the caller)

  std::unique_ptr<OwnerReadingSource> source_;
  std::string owner_file_;
  StatusBoard* board_;
  HandBack* hand_back_;
  double hand_back_deadline_s_;
  mutable std::mutex eval_mu_;  // serialises EvaluateNow (policy_ and source_)
  OwnerPolicy policy_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  OwnerDecision decision_;
  bool paused_ = false, wake_ = false, quit_ = false;
  std::thread thread_;
};

}  // namespace gleaner::agent
