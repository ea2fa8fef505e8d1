// Exponential backoff with full jitter: delay n is uniform in [d/2, d] where
// d = min(cap, base * 2^n). Not thread-safe (one per loop).
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>

namespace gleaner::agent {

class Backoff {
 public:
  Backoff(double base_s, double cap_s, uint64_t seed = std::random_device{}())
      : base_(base_s), cap_(cap_s), rng_(seed) {}
  double Next() {
    double d = std::min(cap_, base_ * double(uint64_t(1) << std::min(attempt_, 30)));
    ++attempt_;
    std::uniform_real_distribution<double> u(d / 2, d);
    return u(rng_);
  }
  void Reset() { attempt_ = 0; }
  int attempts() const { return attempt_; }

 private:
  double base_, cap_;
  int attempt_ = 0;
  std::mt19937_64 rng_;
};

}  // namespace gleaner::agent
