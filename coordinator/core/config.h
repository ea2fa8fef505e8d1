// Coordinator settings that the core's decisions depend on. Filled by the shell from flags,
// environment and config files; plain values, validated by Validate().
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "coordinator/core/rate_limit.h"
#include "shared/status.h"

namespace gleaner::core {

// Minimum average rate of a blob transfer (blob_policy.h).
struct BlobRateLimit {
  int64_t min_rate = 16384;  // bytes per second on average, once the grace has passed
  int64_t grace_ms = 10000;
};

struct S3Config {
  std::string
      endpoint;  // "http://127.0.0.1:4568" or "https://s3.us-east-1.amazonaws.com"; "" = off
  std::string bucket;
  std::string region = "us-east-1";
  std::string access_key_id;
  std::string secret_access_key;
  bool path_style = true;  // false: virtual-hosted style (bucket.host)
  bool enabled() const { return !endpoint.empty(); }
};

struct CoreConfig {
  double heartbeat_interval_s = 30;
  double stall_after_s = 60;  // default 2 x heartbeat interval
  int keep_checkpoints = 3;   // newest N committed checkpoints kept per job
  int default_max_failures = 3;
  int quarantine_failures = 3;  // failed jobs within the window quarantine a node
  double quarantine_window_s = 3600;
  int autoscale_min = 0;
  int autoscale_max = 40;
  double autoscale_idle_window_s = 600;  // nodes that completed a job this recently stay warm
  double retry_after_s = 5;              // Retry-After on 204 from /v1/work
  // Share of a job's checkpoint commits replayed by another node (verification.h), for jobs
  // submitted without their own verify_fraction. 0 = no spot checks.
  double verify_fraction = 0;
  // A replay normally waits for an idle verifying node, so it never takes a node from a queued
  // job; one open longer than this goes to the next verifying node before queued jobs, so a
  // cheater is caught within about this long even while the queue is full.
  double verify_max_wait_s = 600;
  // Progress watchdog: a job lease whose reported step has not advanced for this long (from the
  // lease's start too, so loading counts) is ended at its next heartbeat, like a failure of
  // that node on that job, and its time after the window is not billed. 0 = off.
  double progress_timeout_s = 1800;
  // Enroll keys: the nodes one key may have registered and not revoked (a key's own max_nodes
  // overrides it; 0 = no limit), and registrations per source address (rate_limit.h).
  int64_t enroll_max_nodes = 100;

  std::string public_url = "http://127.0.0.1:8080";  // base of built-in blob URLs
  std::string blob_signing_key;                      // HMAC key for blob URLs (required)
  double blob_url_ttl_s = 900;
  int64_t max_request_body = 1 << 20;            // JSON bodies
  int64_t max_upload_bytes = int64_t(64) << 30;  // developer uploads
  int64_t max_checkpoint_bytes = int64_t(16) << 30;
  int64_t max_output_bytes = int64_t(16) << 30;
  // Storage quotas per lease (lease_quota.h): output files (how many, bytes in all) and
  // checkpoints and sample images not committed yet (bytes); what stays uncommitted this long
  // after its URL was minted is collected by maintenance, in both storage modes.
  int64_t lease_max_outputs = 8;
  int64_t lease_max_output_bytes = int64_t(8) << 30;
  int64_t lease_max_uncommitted_bytes = int64_t(32) << 30;
  double uncommitted_grace_s = 3600;
  S3Config s3;
  // Hosts whose http(s) URLs a job's model.files may name (--model-hosts; names as
  // NormalizeHostName in shared/model_manifest.h returns them). Empty: model files must be
  // uploads to this coordinator's store.
  std::vector<std::string> model_hosts;

  // Per-caller request rates by role, checked after authentication (rate_limit.h): each API key
  // and each node has its own bucket. A node heartbeats every heartbeat_interval_s and polls
  // /v1/work every retry_after_s; the node default is many times that.
  RateLimit developer_rate{10, 100};
  RateLimit node_rate{2, 60};
  RateLimit operator_rate{100, 1000};
  RateLimit enroll_rate{10, 500};
  RateLimit enroll_address_rate{1, 100};  // per client address, enroll registrations only
  int64_t max_active_jobs = 100;          // pending + running jobs per developer key; 0 = no limit
  int64_t max_spec_bytes = 64 << 10;      // stored job spec (JSON text) of POST /v1/jobs
  // Upload reservations (POST /v1/uploads) a developer key may hold that are not stored yet
  // (within blob_gc_grace_s): how many (429 too_many_uploads) and their bytes (413).
  int64_t max_pending_uploads = 16;
  int64_t max_pending_upload_bytes = int64_t(256) << 30;
  // Maintenance deletes objects nothing refers to once they are this old: checkpoints never
  // committed (or no longer kept), outputs of finished jobs that are not their result, and
  // upload reservations never stored.
  double blob_gc_grace_s = 86400;
  // Blob transfers through the shell (blob_policy.h): after the grace, a body must have moved
  // at least blob_min_rate bytes per second on average, else the transfer ends.
  int64_t blob_min_rate = 16384;
  double blob_rate_grace_s = 10;
  BlobRateLimit blob_rate() const { return {blob_min_rate, int64_t(blob_rate_grace_s * 1000)}; }

  Status Validate() const;
};

}  // namespace gleaner::core
