// One HTTP exchange as both halves of the front end see it (the event loop for API requests, a
// worker thread for blob transfers): the parsed request's metadata, response serialization, the
// route label and the request log line. Internal to the HTTP front end (http_server.cc,
// blob_transfer.cc). Threading: plain functions; RandomBytes and LogExchange are thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "coordinator/core/http.h"
#include "coordinator/dashboard/assets.h"

namespace gleaner::native {

using SteadyClock = std::chrono::steady_clock;

struct RequestMeta {
  std::string method;  // as sent ("HEAD" stays "HEAD")
  std::string path;    // decoded
  std::string query;   // raw, without '?'
  std::string request_id;
  bool http10 = false;
  SteadyClock::time_point start;  // when the request head was complete
};

// Splits a request-target into its decoded path and raw query; false on bad percent-encoding or
// a target that is not origin-form.
bool SplitTarget(const std::string& target, std::string* path, std::string* query);

// Random bytes from OpenSSL's CSPRNG (aborts if it fails: nothing sane can go on without it).
std::string RandomBytes(size_t n);

// Metrics and log label of a request: its route pattern, never the raw path.
std::string RouteLabel(const std::string& method, const std::string& path);

// The status line and headers of a response with a body of content_length bytes (its
// content_type and headers from r), X-Request-Id, and Connection: close (or keep-alive for an
// HTTP/1.0 client) as asked.
std::string ResponseHead(const core::HttpResponse& r, int64_t content_length,
                         const RequestMeta& meta, bool keep_alive);

// Appends the whole response (no body for HEAD) to *out.
void AppendResponse(std::string* out, const core::HttpResponse& r, const RequestMeta& meta,
                    bool keep_alive);

// An embedded dashboard file (public: it holds no data; every API call needs a token).
core::HttpResponse AssetResponse(const dashboard::Asset& a);

// {"error":{code,message}} with an explicit status (for framing errors: 400, 408, 413, 414, 431,
// 501, 505).
core::HttpResponse FramingError(int status, const std::string& message);

// Records the request in the process metrics and writes its log line (one JSON line).
void LogExchange(const RequestMeta& meta, int status);

}  // namespace gleaner::native
