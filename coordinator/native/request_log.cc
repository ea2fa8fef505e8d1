#include "coordinator/native/request_log.h"

#include <openssl/rand.h>

#include <chrono>
#include <cstdlib>

#include "coordinator/core/router.h"
#include "coordinator/dashboard/assets.h"
#include "coordinator/native/log.h"
#include "coordinator/native/metrics.h"
#include "shared/sha256.h"

namespace gleaner::native {

std::string RandomBytes(size_t n) {
  std::string out(n, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(&out[0]), int(n)) != 1) {
    LogError("RAND_bytes failed");
    std::abort();
  }
  return out;
}

std::string NewRequestId() {
  return "req_" + HexEncode(RandomBytes(8).data(), 8);
}

std::string RouteLabel(const std::string& method, const std::string& path) {
  if (path.rfind("/blobs/", 0) == 0) return "/blobs/{key}";
  if ((method == "GET" || method == "HEAD") && dashboard::FindAsset(path) != nullptr) {
    return path == "/" ? "/" : "/dashboard/{file}";
  }
  const core::RouteInfo* r = core::FindRoute(method == "HEAD" ? "GET" : method, path);
  return r != nullptr ? r->pattern : "other";
}

void LogExchange(const RequestMeta& meta, int status) {
  const std::string route = RouteLabel(meta.method, meta.path);
  const double seconds = std::chrono::duration<double>(SteadyClock::now() - meta.start).count();
  ProcessMetrics().ObserveRequest(route, meta.method, status, seconds);
  const LogLevel level = status >= 500 ? LogLevel::kWarn : LogLevel::kInfo;
  if (!LogEnabled(level)) return;  // no fields built for a line nobody reads
  Log(level, "request",
      {{"method", meta.method},
       {"path", meta.path},
       {"route", route},
       {"status", status},
       {"request_id", meta.request_id},
       {"latency_ms", seconds * 1000.0}});
}

}  // namespace gleaner::native
