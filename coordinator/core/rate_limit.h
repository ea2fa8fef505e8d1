// Per-caller rate limits: token-bucket math (pure, injected now) and a bounded bucket table.
//
// The core decides *whether* a request may pass; the state (one bucket per caller) lives in the
// shell that owns a RateLimiter: the native shell wraps a BucketTable in a mutex (one table per
// process), the edge shell keeps one BucketTable per wasm instance (per isolate). Limits are
// therefore per process / per isolate, not global: N processes admit up to N times the rate.
//
// Bucket: capacity `burst` tokens, refilled at `per_second`; each request takes one token. An
// empty bucket answers "wait retry_after_s" (the time until one token is back).
// Portable: no clock, no threads, no exceptions. BucketTable is not thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>

#include "shared/status.h"

namespace gleaner::core {

struct RateLimit {
  double per_second = 0;  // sustained rate; 0 = unlimited
  double burst = 0;       // bucket capacity (>= 1 when limited)
  bool limited() const { return per_second > 0; }
};

// Parses "RATE:BURST" ("5:60" = 5 requests/s, bursts of 60) or "off" / "0" (unlimited).
Result<RateLimit> ParseRateLimit(const std::string& text);
// "5:60" or "off": the inverse of ParseRateLimit, for help texts and logs.
std::string FormatRateLimit(const RateLimit& limit);

// The bucket of a client address: an IPv4 address as it is (an IPv4-mapped IPv6 one as IPv4),
// an IPv6 address by its /64 prefix ("2001:db8:0:1::/64": one subscriber usually holds a whole
// /64), anything else as it is.
std::string AddressBucket(const std::string& addr);

struct TokenBucket {
  double tokens = 0;
  int64_t updated_ms = 0;
  int64_t full_at_ms = 0;  // when the bucket will be full again (for pruning)
  bool fresh = true;       // never used: starts full
};

struct RateDecision {
  bool allowed = true;
  double retry_after_s = 0;  // when refused: seconds until a token is available
};

// Refills `bucket` for the time since its last update (a clock going backwards refills nothing)
// and takes one token if there is one.
RateDecision TakeToken(TokenBucket* bucket, const RateLimit& limit, int64_t now_ms);

// Where the shell keeps buckets. Implementations used by a concurrent shell must be thread-safe.
class RateLimiter {
 public:
  virtual ~RateLimiter() = default;
  // Takes a token from the bucket named key (created full on first use).
  virtual RateDecision Take(const std::string& key, const RateLimit& limit, int64_t now_ms) = 0;
};

// Buckets in a hash map. When it holds max_keys buckets, buckets that have refilled completely
// (indistinguishable from new ones) are dropped first; if none has, the oldest half is dropped
// (their callers start over with a full bucket). Keys are caller ids, so the table is bounded
// by the number of valid tokens in use anyway. Not thread-safe.
class BucketTable : public RateLimiter {
 public:
  explicit BucketTable(size_t max_keys = 100000) : max_keys_(max_keys) {}
  RateDecision Take(const std::string& key, const RateLimit& limit, int64_t now_ms) override;
  size_t size() const { return buckets_.size(); }

 private:
  void Prune(int64_t now_ms);
  size_t max_keys_;
  std::unordered_map<std::string, TokenBucket> buckets_;
};

}  // namespace gleaner::core
