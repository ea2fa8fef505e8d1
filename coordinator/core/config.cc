#include "coordinator/core/config.h"

namespace gleaner::core {

Status CoreConfig::Validate() const {
  if (!(heartbeat_interval_s > 0 && heartbeat_interval_s <= 3600)) {
    return Status::Invalid("heartbeat interval must be in (0, 3600] seconds");
  }
  if (!(stall_after_s >= heartbeat_interval_s && stall_after_s <= 86400)) {
    return Status::Invalid("stall-after must be at least the heartbeat interval and at most a day");
  }
  if (keep_checkpoints < 1 || keep_checkpoints > 100) {
    return Status::Invalid("keep-checkpoints must be in [1, 100]");
  }
  if (default_max_failures < 1 || default_max_failures > 100) {
    return Status::Invalid("max failures must be in [1, 100]");
  }
  if (autoscale_min < 0 || autoscale_max < autoscale_min || autoscale_max > 100000) {
    return Status::Invalid("autoscaler bounds must satisfy 0 <= min <= max <= 100000");
  }
  if (!(autoscale_idle_window_s >= 0 && autoscale_idle_window_s <= 7 * 86400)) {
    return Status::Invalid("autoscaler idle window must be in [0, 604800] seconds");
  }
  if (blob_signing_key.size() < 16) {
    return Status::Invalid("blob signing key must be at least 16 bytes");
  }
  if (public_url.rfind("http://", 0) != 0 && public_url.rfind("https://", 0) != 0) {
    return Status::Invalid("public URL must start with http:// or https://");
  }
  if (s3.enabled() &&
      (s3.bucket.empty() || s3.access_key_id.empty() || s3.secret_access_key.empty())) {
    return Status::Invalid("S3 needs a bucket and credentials when an endpoint is set");
  }
  if (!(verify_fraction >= 0 && verify_fraction <= 1)) {
    return Status::Invalid("verify fraction must be in [0, 1]");
  }
  if (!(progress_timeout_s >= 0)) return Status::Invalid("progress timeout must be >= 0 (0 = off)");
  if (enroll_max_nodes < 0) return Status::Invalid("enroll max nodes must be >= 0 (0 = no limit)");
  if (max_active_jobs < 0) return Status::Invalid("max active jobs must be >= 0 (0 = no limit)");
  if (max_spec_bytes < 1024 || max_spec_bytes > (int64_t(1) << 30)) {
    return Status::Invalid("max spec bytes must be in [1024, 1073741824]");
  }
  for (const std::string& h : model_hosts) {
    if (h.empty() || h[0] == '!') {
      return Status::Invalid("model-hosts: '" + (h.empty() ? h : h.substr(1)) +
                             "' is not a host name");
    }
  }
  for (const RateLimit* r :
       {&developer_rate, &node_rate, &operator_rate, &enroll_rate, &enroll_address_rate}) {
    if (r->limited() && !(r->burst >= 1))
      return Status::Invalid("a rate limit's burst must be >= 1");
  }
  return Status::Ok();
}

}  // namespace gleaner::core
