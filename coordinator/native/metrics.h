// MetricsRegistry: what only this process knows, for GET /metrics (Prometheus text 0.0.4).
//
// Requests by route pattern (never the raw path: ids must not become label values), method and
// status; request latency histograms by route; and the protocol counters derived from them
// (claims, heartbeats, checkpoint commits, completions, failures, releases). The core's
// database gauges come first in the response; HttpServer appends Text() after them.
// Counters are per process and start at zero (Prometheus handles resets).
// Threading: every method is thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

namespace gleaner::native {

class MetricsRegistry {
 public:
  MetricsRegistry();

  // One finished request. route: the route pattern ("/v1/jobs/{id}/heartbeat"), "other" for
  // unknown paths.
  void ObserveRequest(const std::string& route, const std::string& method, int status,
                      double seconds);
  // Bytes accepted into the blob store by PUT /blobs/...
  void AddBlobBytesWritten(int64_t bytes);
  // One write transaction of the group committer, with the batches it carried.
  void AddCommitGroup(size_t batches);

  // The registry in the Prometheus text format.
  std::string Text() const;

  // Histogram bucket upper bounds, seconds.
  static const std::vector<double>& Buckets();

 private:
  struct Histogram {
    std::vector<uint64_t> counts;  // per bucket (not cumulative)
    uint64_t count = 0;
    double sum = 0;
  };
  mutable std::mutex mu_;
  double start_time_s_;
  std::map<std::tuple<std::string, std::string, int>, uint64_t> requests_;
  std::map<std::pair<std::string, std::string>, Histogram> latency_;
  std::map<std::string, uint64_t> protocol_;
  int64_t blob_bytes_written_ = 0;
  uint64_t commit_groups_ = 0;
  uint64_t commit_batches_ = 0;
};

// The process-wide registry of gleaner-coordinator.
MetricsRegistry& ProcessMetrics();

}  // namespace gleaner::native
