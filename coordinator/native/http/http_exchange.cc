#include "coordinator/native/http/http_exchange.h"

#include <openssl/rand.h>

#include <cstdlib>

#include "coordinator/core/context.h"
#include "coordinator/core/router.h"
#include "coordinator/native/http/http_parser.h"
#include "coordinator/native/log.h"
#include "coordinator/native/metrics.h"

namespace gleaner::native {

bool SplitTarget(const std::string& target, std::string* path, std::string* query) {
  if (target.empty() || target[0] != '/') return false;
  size_t q = target.find('?');
  *query = q == std::string::npos ? "" : target.substr(q + 1);
  return core::UrlDecode(target.substr(0, q), path, /*plus_is_space=*/false);
}

std::string RandomBytes(size_t n) {
  std::string out(n, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(&out[0]), int(n)) != 1) {
    LogError("RAND_bytes failed");
    std::abort();
  }
  return out;
}

std::string RouteLabel(const std::string& method, const std::string& path) {
  if (path.rfind("/blobs/", 0) == 0) return "/blobs/{key}";
  if ((method == "GET" || method == "HEAD") && dashboard::FindAsset(path) != nullptr) {
    return path == "/" ? "/" : "/dashboard/{file}";
  }
  const core::RouteInfo* r = core::FindRoute(method == "HEAD" ? "GET" : method, path);
  return r != nullptr ? r->pattern : "other";
}

std::string ResponseHead(const core::HttpResponse& r, int64_t content_length,
                         const RequestMeta& meta, bool keep_alive) {
  std::string h;
  h.reserve(256);
  h += "HTTP/1.1 ";
  h += std::to_string(r.status);
  h += ' ';
  h += http::ReasonPhrase(r.status);
  h += "\r\n";
  for (const auto& [name, value] : r.headers) {
    h += name;
    h += ": ";
    h += value;
    h += "\r\n";
  }
  // 1xx, 204 and 304 carry no body and no Content-Length.
  if (r.status >= 200 && r.status != 204 && r.status != 304) {
    if (content_length > 0 || !r.content_type.empty()) {
      h += "Content-Type: ";
      h += r.content_type.empty() ? "application/octet-stream" : r.content_type;
      h += "\r\n";
    }
    h += "Content-Length: ";
    h += std::to_string(content_length);
    h += "\r\n";
  }
  if (!meta.request_id.empty()) {
    h += "X-Request-Id: ";
    h += meta.request_id;
    h += "\r\n";
  }
  if (!keep_alive) {
    h += "Connection: close\r\n";
  } else if (meta.http10) {
    h += "Connection: keep-alive\r\n";
  }
  h += "\r\n";
  return h;
}

void AppendResponse(std::string* out, const core::HttpResponse& r, const RequestMeta& meta,
                    bool keep_alive) {
  const bool no_body = r.status == 204 || r.status == 304 || r.status < 200;
  *out += ResponseHead(r, no_body ? 0 : int64_t(r.body.size()), meta, keep_alive);
  if (meta.method != "HEAD" && !no_body) *out += r.body;
}

core::HttpResponse AssetResponse(const dashboard::Asset& a) {
  core::HttpResponse r;
  r.status = 200;
  r.content_type = a.content_type;
  r.body.assign(reinterpret_cast<const char*>(a.data), a.size);
  r.headers = {{"Cache-Control", "no-cache"},
               {"X-Content-Type-Options", "nosniff"},
               {"X-Frame-Options", "DENY"},
               {"Content-Security-Policy",
                "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
                "frame-ancestors 'none'"}};
  return r;
}

core::HttpResponse FramingError(int status, const std::string& message) {
  const char* code = status == 408   ? "request_timeout"
                     : status == 413 ? "too_large"
                     : status == 414 ? "uri_too_long"
                     : status == 431 ? "headers_too_large"
                     : status == 501 ? "not_implemented"
                     : status == 505 ? "http_version_not_supported"
                                     : "bad_request";
  return core::ErrorResponse(status, code, message);
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
