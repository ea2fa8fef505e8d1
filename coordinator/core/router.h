// The route table of API v1 and the request pipeline:
//   match (404 unknown path, 405 wrong method) -> body size (413) -> bearer token (401) ->
//   one auth batch (token hash in api_keys / nodes; 401 unknown, 403 wrong role; or, for a token
//   the shell's CallerCache remembers, a check inside the handler's first batch instead) ->
//   rate limit of the caller's role (429 + Retry-After) -> JSON body (400) -> handler.
// Public so tests and docs can enumerate every route with its roles.
#pragma once

#include <string>
#include <vector>

#include "coordinator/core/caller_cache.h"
#include "coordinator/core/context.h"
#include "coordinator/core/rate_limit.h"

namespace gleaner::core {

struct RouteInfo {
  const char* method;
  const char* pattern;  // "/v1/jobs/{id}/heartbeat": {name} matches one path segment
  unsigned roles;       // RoleBit mask; 0 = no token needed
  Plan (*handler)(CtxPtr);
  bool json_body;  // body parsed as a JSON object ("" reads as {})
};

const std::vector<RouteInfo>& Routes();

// The route serving method + path, or nullptr (for metrics labels and logs: the pattern, not the
// path, so ids do not become label values).
const RouteInfo* FindRoute(const std::string& method, const std::string& path);

// The whole pipeline for one request. limiter (may be null: no rate limits) holds the buckets;
// callers (may be null) remembers who tokens belong to (caller_cache.h).
Plan RouteRequest(const CoreConfig* config, RateLimiter* limiter, CallerCache* callers,
                  const HttpRequest& request);

// The configured rate limit of a role bit (unlimited for public routes).
RateLimit RoleRateLimit(const CoreConfig& config, unsigned role_bit);

}  // namespace gleaner::core
