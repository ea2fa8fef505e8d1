// MetricsRegistry: counters and cumulative histograms in the Prometheus text format, protocol
// counters derived from successful calls, and no lost updates under concurrent observers.
#include "coordinator/native/metrics.h"

#include <catch2/catch.hpp>
#include <thread>
#include <vector>

using gleaner::native::MetricsRegistry;

TEST_CASE("metrics: requests, cumulative latency buckets, protocol counters", "[metrics]") {
  MetricsRegistry m;
  m.ObserveRequest("/v1/work", "POST", 200, 0.0007);
  m.ObserveRequest("/v1/work", "POST", 204, 0.003);
  m.ObserveRequest("/v1/work", "POST", 204, 20);  // beyond the last bucket: only +Inf
  m.ObserveRequest("/v1/jobs/{id}/heartbeat", "POST", 409, 0.001);
  m.ObserveRequest("/v1/jobs/{id}/heartbeat", "POST", 200, 0.001);
  m.AddBlobBytesWritten(1234);
  std::string t = m.Text();
  auto has = [&](const std::string& line) {
    INFO(line);
    CHECK(t.find(line + "\n") != std::string::npos);
  };
  has("gleaner_claims_total 1");
  has("gleaner_claims_empty_total 2");
  has("gleaner_heartbeats_total 1");  // the 409 is not a heartbeat
  has("gleaner_checkpoint_commits_total 0");
  has("gleaner_blob_bytes_written_total 1234");
  has("gleaner_http_requests_total{route=\"/v1/work\",method=\"POST\",status=\"204\"} 2");
  has("gleaner_http_request_duration_seconds_bucket{route=\"/v1/"
      "work\",method=\"POST\",le=\"0.0005\"} 0");
  has("gleaner_http_request_duration_seconds_bucket{route=\"/v1/"
      "work\",method=\"POST\",le=\"0.001\"} 1");
  has("gleaner_http_request_duration_seconds_bucket{route=\"/v1/"
      "work\",method=\"POST\",le=\"0.005\"} 2");
  has("gleaner_http_request_duration_seconds_bucket{route=\"/v1/work\",method=\"POST\",le=\"10\"} "
      "2");
  has("gleaner_http_request_duration_seconds_bucket{route=\"/v1/"
      "work\",method=\"POST\",le=\"+Inf\"} 3");
  has("gleaner_http_request_duration_seconds_count{route=\"/v1/work\",method=\"POST\"} 3");
  has("# TYPE gleaner_http_request_duration_seconds histogram");
}

TEST_CASE("metrics: concurrent observers lose nothing", "[metrics]") {
  MetricsRegistry m;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 2000; ++i) m.ObserveRequest("/v1/work", "POST", 200, 0.002);
    });
  }
  for (auto& th : threads) th.join();
  std::string t = m.Text();
  CHECK(t.find("gleaner_claims_total 8000\n") != std::string::npos);
  CHECK(t.find("gleaner_http_request_duration_seconds_count{route=\"/v1/work\",method=\"POST\"} "
               "8000\n") != std::string::npos);
}
