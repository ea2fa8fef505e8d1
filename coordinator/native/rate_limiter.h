// The native shell's rate-limit state: the core's BucketTable behind a mutex, one per process
// (so limits are per coordinator process; see docs/operations.md). Thread-safe.
#pragma once

#include <mutex>
#include <string>

#include "coordinator/core/rate_limit.h"

namespace gleaner::native {

class LockedRateLimiter : public core::RateLimiter {
 public:
  explicit LockedRateLimiter(size_t max_keys = 100000) : table_(max_keys) {}

  core::RateDecision Take(const std::string& key, const core::RateLimit& limit,
                          int64_t now_ms) override {
    std::lock_guard<std::mutex> lock(mu_);
    return table_.Take(key, limit, now_ms);
  }

 private:
  std::mutex mu_;
  core::BucketTable table_;
};

}  // namespace gleaner::native
