#include "coordinator/native/metrics.h"

#include <chrono>
#include <cstdio>

namespace gleaner::native {
namespace {

std::string Fmt(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

// Label values are route patterns and methods; escape anyway (\, ", newline).
std::string Esc(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\' || c == '"') out.push_back('\\');
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out.push_back(c);
  }
  return out;
}

// Successful protocol calls counted under their own names.
const char* ProtocolName(const std::string& route, const std::string& method, int status) {
  if (method != "POST") return nullptr;
  if (route == "/v1/work")
    return status == 200 ? "claims" : status == 204 ? "claims_empty" : nullptr;
  if (status != 200) return nullptr;
  if (route == "/v1/jobs/{id}/heartbeat") return "heartbeats";
  if (route == "/v1/jobs/{id}/checkpoints/{step}/commit") return "checkpoint_commits";
  if (route == "/v1/jobs/{id}/complete") return "completions";
  if (route == "/v1/jobs/{id}/fail") return "failures";
  if (route == "/v1/jobs/{id}/release") return "releases";
  return nullptr;
}

}  // namespace

MetricsRegistry::MetricsRegistry()
    : start_time_s_(
          std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
              .count()) {}

const std::vector<double>& MetricsRegistry::Buckets() {
  static const std::vector<double> kBuckets = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                               0.1,    0.25,  0.5,    1,     2.5,  5,     10};
  return kBuckets;
}

void MetricsRegistry::ObserveRequest(const std::string& route, const std::string& method,
                                     int status, double seconds) {
  const std::vector<double>& b = Buckets();
  size_t k = 0;
  while (k < b.size() && seconds > b[k]) ++k;
  const char* proto = ProtocolName(route, method, status);
  std::lock_guard<std::mutex> lock(mu_);
  requests_[{route, method, status}]++;
  Histogram& h = latency_[{route, method}];
  if (h.counts.empty()) h.counts.assign(b.size() + 1, 0);
  h.counts[k]++;
  h.count++;
  h.sum += seconds;
  if (proto != nullptr) protocol_[proto]++;
}

void MetricsRegistry::AddBlobBytesWritten(int64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  blob_bytes_written_ += bytes;
}

void MetricsRegistry::AddCommitGroup(size_t batches) {
  std::lock_guard<std::mutex> lock(mu_);
  commit_groups_ += 1;
  commit_batches_ += batches;
}

std::string MetricsRegistry::Text() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  out +=
      "# HELP gleaner_db_commits_total Write transactions (each one fsync) of the group committer "
      "(this process).\n# TYPE gleaner_db_commits_total counter\ngleaner_db_commits_total " +
      std::to_string(commit_groups_) +
      "\n# HELP gleaner_db_committed_batches_total Request write batches those transactions "
      "carried (this process).\n# TYPE gleaner_db_committed_batches_total counter\n"
      "gleaner_db_committed_batches_total " +
      std::to_string(commit_batches_) + "\n";
  out +=
      "# HELP gleaner_process_start_time_seconds Start time of this coordinator process.\n"
      "# TYPE gleaner_process_start_time_seconds gauge\n"
      "gleaner_process_start_time_seconds " +
      std::to_string(int64_t(start_time_s_)) + "\n";
  static const char* kProtocol[][2] = {
      {"claims", "Jobs handed out by POST /v1/work."},
      {"claims_empty", "POST /v1/work answered 204 (nothing to do)."},
      {"heartbeats", "Heartbeats accepted."},
      {"checkpoint_commits", "Checkpoint commits accepted."},
      {"completions", "Jobs completed."},
      {"failures", "Job failures reported by nodes."},
      {"releases", "Leases released by interrupted nodes."},
  };
  for (const auto& [name, help] : kProtocol) {
    auto it = protocol_.find(name);
    std::string full = std::string("gleaner_") + name + "_total";
    out += "# HELP " + full + " " + help + " (this process)\n# TYPE " + full + " counter\n" + full +
           " " + std::to_string(it == protocol_.end() ? 0 : it->second) + "\n";
  }
  out +=
      "# HELP gleaner_blob_bytes_written_total Bytes stored by blob PUTs (this process).\n"
      "# TYPE gleaner_blob_bytes_written_total counter\n"
      "gleaner_blob_bytes_written_total " +
      std::to_string(blob_bytes_written_) + "\n";
  out +=
      "# HELP gleaner_http_requests_total HTTP requests by route, method and status.\n"
      "# TYPE gleaner_http_requests_total counter\n";
  for (const auto& [key, n] : requests_) {
    out += "gleaner_http_requests_total{route=\"" + Esc(std::get<0>(key)) + "\",method=\"" +
           Esc(std::get<1>(key)) + "\",status=\"" + std::to_string(std::get<2>(key)) + "\"} " +
           std::to_string(n) + "\n";
  }
  out +=
      "# HELP gleaner_http_request_duration_seconds Request latency by route and method.\n"
      "# TYPE gleaner_http_request_duration_seconds histogram\n";
  const std::vector<double>& b = Buckets();
  for (const auto& [key, h] : latency_) {
    std::string labels = "route=\"" + Esc(key.first) + "\",method=\"" + Esc(key.second) + "\"";
    uint64_t cumulative = 0;
    for (size_t k = 0; k < b.size(); ++k) {
      cumulative += h.counts[k];
      out += "gleaner_http_request_duration_seconds_bucket{" + labels + ",le=\"" + Fmt(b[k]) +
             "\"} " + std::to_string(cumulative) + "\n";
    }
    out += "gleaner_http_request_duration_seconds_bucket{" + labels + ",le=\"+Inf\"} " +
           std::to_string(h.count) + "\n";
    out += "gleaner_http_request_duration_seconds_sum{" + labels + "} " + Fmt(h.sum) + "\n";
    out += "gleaner_http_request_duration_seconds_count{" + labels + "} " +
           std::to_string(h.count) + "\n";
  }
  return out;
}

MetricsRegistry& ProcessMetrics() {
  static MetricsRegistry* registry =
      new MetricsRegistry();  // never destroyed: threads may log late
  return *registry;
}

}  // namespace gleaner::native
