// A small HTTP/1.1 load generator for loopback benchmarks: N keep-alive connections driven by one
// epoll thread, each sending its next request as soon as the previous response is complete.
// Requests come from a callback (connection index, sequence number); responses are checked by
// another (status, body). Reports requests/s and latency percentiles.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace gleaner::bench {

struct LoadResult {
  int64_t requests = 0;    // completed in the measured window
  int64_t errors = 0;      // unexpected status or transport error
  int64_t reconnects = 0;  // responses with Connection: close
  double seconds = 0;
  std::vector<double> latencies_ms;  // of the measured requests
  double rps() const { return seconds > 0 ? double(requests) / seconds : 0; }
  double Percentile(double p) const;  // 0..100
};

struct LoadOptions {
  int port = 0;
  int connections = 64;
  double warmup_s = 0.5;  // requests completed during warm-up are not measured
  double duration_s = 5;  // measured window
  // Whole request bytes for connection c, its n-th request.
  std::function<std::string(int c, int64_t n)> request;
  // Called with every measured response; return false to count it as an error.
  std::function<bool(int status, const std::string& body)> check;
};

// Runs the load; transport errors reconnect. Returns when the window has passed.
LoadResult RunLoad(const LoadOptions& options);

}  // namespace gleaner::bench
