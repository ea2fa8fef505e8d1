// What the coordinator's HTTP shell adds to every exchange: fresh randomness (request ids and
// the core's entropy), the route label (the route pattern, never the raw path: ids must not
// become metric labels), and the one log line and metrics per request.
// Threading: plain functions, thread-safe.
#pragma once

#include <cstddef>
#include <string>

#include "coordinator/native/http/http_exchange.h"

namespace gleaner::native {

// Random bytes from OpenSSL's CSPRNG (aborts if it fails: nothing sane can go on without it).
std::string RandomBytes(size_t n);

// "req_" + 16 random hex digits.
std::string NewRequestId();

// Metrics and log label of a request: its route pattern, never the raw path.
std::string RouteLabel(const std::string& method, const std::string& path);

// Records the request in the process metrics and writes its log line (one JSON line).
void LogExchange(const RequestMeta& meta, int status);

}  // namespace gleaner::native
