// Instance deletion cost on SaladCloud (DESIGN §8): while this agent holds a job it asks the
// platform to spare its container instance when the group is scaled in, and lets it go first when
// idle. The platform's instance metadata service (IMDS) takes
//   PUT {base}/v1/deletion-cost   Metadata: true   Content-Type: application/json
//   {"deletion_cost": N}          → 204
// where instances with a lower cost are removed first.
//
// Enabled only on that platform: when GLEANER_IMDS_URL is set (a base URL; "off" disables) or
// else when SALAD_MACHINE_ID is set (base http://169.254.169.254). Elsewhere it does nothing.
//
// Threading and errors: SetBusy() only records the wanted value and never blocks; one background
// thread sends it. A failed PUT (refused, timeout, non-2xx) is logged and retried with backoff
// until it succeeds or a newer value supersedes it. Nothing here can stop or crash the agent.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

#include "shared/native/http_client.h"

namespace gleaner::agent {

struct DeletionCostOptions {
  std::string base_url;      // "" = disabled
  int64_t busy_cost = 1000;  // while a job runs
  int64_t idle_cost = 0;     // otherwise (also sent once at start: a restart mid-job is idle)
  double retry_min_s = 1;    // backoff between failed attempts, doubling up to retry_max_s
  double retry_max_s = 60;
  int timeout_ms = 2000;  // per request; the IMDS is on the node itself
};

// The options for this process: base_url from GLEANER_IMDS_URL / SALAD_MACHINE_ID (above).
DeletionCostOptions DeletionCostFromEnv();

class DeletionCost {
 public:
  // Starts the sender thread when options.base_url is set; http must outlive this object.
  DeletionCost(DeletionCostOptions options, net::HttpClient* http);
  // Stops the thread: waits for at most one request in flight (timeout_ms), sends nothing more.
  ~DeletionCost();
  DeletionCost(const DeletionCost&) = delete;
  DeletionCost& operator=(const DeletionCost&) = delete;

  bool enabled() const { return !options_.base_url.empty(); }
  // Busy (a job is running) or idle. Returns at once; the newest value wins.
  void SetBusy(bool busy);

 private:
  void Loop();
  Status Put(int64_t cost);

  const DeletionCostOptions options_;
  net::HttpClient* const http_;
  std::mutex mu_;
  std::condition_variable cv_;
  int64_t wanted_;
  bool have_sent_ = false;
  int64_t sent_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace gleaner::agent
