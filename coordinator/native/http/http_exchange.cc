#include "coordinator/native/http/http_exchange.h"

#include "coordinator/native/http/http_parser.h"

namespace gleaner::native {

bool SplitTarget(const std::string& target, std::string* path, std::string* query) {
  size_t q = target.find('?');
  *query = q == std::string::npos ? "" : target.substr(q + 1);
  return core::DecodePath(target.substr(0, q), path);
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

core::HttpResponse FramingError(int status, const std::string& message) {
  const char* code = status == 408   ? "request_timeout"
                     : status == 413 ? "too_large"
                     : status == 414 ? "uri_too_long"
                     : status == 431 ? "headers_too_large"
                     : status == 501 ? "not_implemented"
                     : status == 505 ? "http_version_not_supported"
                                     : "bad_request";
  return core::HttpResponse::Json(status, {{"error", {{"code", code}, {"message", message}}}});
}

}  // namespace gleaner::native
