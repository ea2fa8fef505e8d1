// A stop request that threads can wait on: the agent's shutdown signal, and each job's
// "stop now" flag. Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>

namespace gleaner::agent {

class StopToken {
 public:
  void Request() {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    cv_.notify_all();
  }
  bool requested() const {
    std::lock_guard<std::mutex> lock(mu_);
    return stop_;
  }
  // Sleeps up to seconds; true if a stop was requested (returns early then).
  bool WaitFor(double seconds) const {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::duration<double>(seconds), [this] { return stop_; });
  }

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool stop_ = false;
};

// A request to hand the running job back (checkpoint, upload, release) while the agent keeps
// running: the owner paused it or a control turned "not allowed". The first request since
// Clear() fixes the reason and the deadline. Thread-safe.
class HandBack {
 public:
  void Request(const std::string& reason, double deadline_s) {
    std::lock_guard<std::mutex> lock(mu_);
    if (requested_) return;
    requested_ = true;
    reason_ = reason;
    deadline_ = std::chrono::steady_clock::now() +
                std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                    std::chrono::duration<double>(deadline_s));
  }
  void Clear() {
    std::lock_guard<std::mutex> lock(mu_);
    requested_ = false;
  }
  bool requested() const {
    std::lock_guard<std::mutex> lock(mu_);
    return requested_;
  }
  std::string reason() const {
    std::lock_guard<std::mutex> lock(mu_);
    return reason_;
  }
  // Seconds to the deadline; 1e9 when not requested.
  double SecondsLeft() const {
    std::lock_guard<std::mutex> lock(mu_);
    if (!requested_) return 1e9;
    return std::chrono::duration<double>(deadline_ - std::chrono::steady_clock::now()).count();
  }

 private:
  mutable std::mutex mu_;
  bool requested_ = false;
  std::string reason_;
  std::chrono::steady_clock::time_point deadline_;
};

}  // namespace gleaner::agent
