// A stop request that threads can wait on: the agent's shutdown signal, and each job's
// "stop now" flag. Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

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

}  // namespace gleaner::agent
