// One HTTP exchange as the event loop and the workers that take connections over see it: the
// request's metadata, response serialization and the loop's own framing errors. Nothing here
// knows what a request means. Threading: plain functions.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "coordinator/core/http.h"

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

// Splits a request-target into its decoded path (core::DecodePath) and raw query; false on bad
// percent-encoding or a target that is not origin-form.
bool SplitTarget(const std::string& target, std::string* path, std::string* query);

// The status line and headers of a response with a body of content_length bytes (its
// content_type and headers from r), X-Request-Id, and Connection: close (or keep-alive for an
// HTTP/1.0 client) as asked.
std::string ResponseHead(const core::HttpResponse& r, int64_t content_length,
                         const RequestMeta& meta, bool keep_alive);

// Appends the whole response (no body for HEAD) to *out.
void AppendResponse(std::string* out, const core::HttpResponse& r, const RequestMeta& meta,
                    bool keep_alive);

// {"error":{code,message}} with an explicit status (for framing errors: 400, 408, 413, 414, 431,
// 501, 505).
core::HttpResponse FramingError(int status, const std::string& message);

}  // namespace gleaner::native
