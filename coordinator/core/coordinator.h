// The coordinator's brain: sans-I/O, portable (native and wasm32), exception-free.
//
// A shell (native: epoll HTTP + SQLite; edge: Worker + D1 + R2) turns each HTTP request into an
// HttpRequest, asks Handle() for a Plan, runs the Plan's SQL batches, and sends the response.
// The core owns every decision: validation, auth, scheduling, leases and fencing, cost math,
// autoscaler target, report shaping, blob URL minting and checking. It never opens a socket or
// file, never reads the clock (now_ms comes in), never draws randomness (entropy comes in).
//
// Threading: a Coordinator is immutable after construction; Handle() and friends are const and
// may be called concurrently from many threads. Plans are independent of each other.
// Lifetime: a Plan may refer to the Coordinator that made it; keep the Coordinator alive until
// every plan it made is done.
#pragma once

#include <cstdint>
#include <string>

#include "coordinator/core/caller_cache.h"
#include "coordinator/core/config.h"
#include "coordinator/core/http.h"
#include "coordinator/core/plan.h"
#include "coordinator/core/rate_limit.h"

namespace gleaner::core {

// What the shell's pool provider reported just before a maintenance tick; recorded with the
// autoscaler's decision in scaling_events.
struct PoolObservation {
  std::string provider;  // "" = no provider configured
  int64_t current = -1;  // nodes the provider reports; -1 = unknown (API down, no provider)
};

// What a signed blob URL allows (built-in blob store only; S3 URLs are checked by S3).
struct BlobGrant {
  std::string key;       // object key, e.g. "jobs/j_1/ckpt/e2/s0000000100"
  std::string method;    // "PUT" or "GET"
  int64_t max_size = 0;  // PUT: largest body accepted
  std::string sha256;    // PUT: expected content hash when known in advance, else ""
};

class Coordinator {
 public:
  // limiter (optional, owned by the shell, must outlive this): where per-caller rate-limit
  // buckets live (rate_limit.h). Handle() calls it from any thread, so it must be thread-safe
  // when Handle() is called concurrently. Null: no rate limits.
  // callers (optional, likewise): callers remembered between requests, which saves a request
  // its lookup round trip (caller_cache.h). Null: every request looks its token up.
  explicit Coordinator(CoreConfig config, RateLimiter* limiter = nullptr,
                       CallerCache* callers = nullptr);

  const CoreConfig& config() const { return config_; }

  // Applies the numbered migrations not yet recorded in schema_migrations; idempotent and safe
  // when two processes start at once (a losing racer's batch fails on the version's primary key;
  // the shell simply runs MigrationPlan again).
  Plan MigrationPlan() const;

  // Ensures an operator key with this token exists (GLEANER_OPERATOR_TOKEN); idempotent.
  // Revokes the keys earlier values of it created (the value was rotated); a key of this
  // token that an operator revoked stays revoked.
  Plan BootstrapOperatorPlan(const std::string& token, int64_t now_ms) const;
  // The same for the enroll key the local pool provider hands its agents (never the operator
  // token): an enroll key named "local-pool"; a changed token revokes the previous one.
  Plan PoolEnrollKeyPlan(const std::string& token, int64_t now_ms) const;

  // Every /v1/* route, /healthz and /metrics. Blob transfer routes (/blobs/...) are streamed by
  // the shell after AuthorizeBlob().
  Plan Handle(const HttpRequest& request) const;

  // One maintenance tick: reap stalled leases, quarantine bad nodes, autoscaler target.
  // The final response body is a JSON summary of what was done (for logs and the admin route);
  // what the pool provider should do (the target, the machines of quarantined nodes to
  // reallocate) is the final plan's pool_actions().
  Plan MaintenancePlan(int64_t now_ms, const PoolObservation& pool = {}) const;

  // Checks a signed blob URL (path "/blobs/<key>", query with exp/sig/...) for the method.
  Result<BlobGrant> AuthorizeBlob(const std::string& method, const std::string& path,
                                  const std::string& query, int64_t now_ms) const;

  // Asked by the shell after an upload is complete and hashed, before it replaces anything at
  // key: 204 if it may, 409 if key holds a committed checkpoint or a completed job's output with
  // other bytes (their PUT URLs stay valid for a while; a late or zombie upload must not change
  // what was committed).
  Plan BlobPlacePlan(const std::string& key, const std::string& sha256) const;

  // Records that the shell durably stored a blob (after fsync + rename); commits and downloads
  // check against this record.
  Plan BlobStoredPlan(const std::string& key, int64_t size, const std::string& sha256,
                      int64_t now_ms) const;

 private:
  CoreConfig config_;
  RateLimiter* limiter_;
  CallerCache* callers_;
};

}  // namespace gleaner::core
