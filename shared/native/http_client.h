// HTTP as the native programs' clients see it (the agent, the gleaner CLI, the coordinator's
// pool providers): one call in, one response out. The libcurl implementation is in
// curl_http.{h,cc} (the only file that talks to libcurl); tests inject their own HttpClient to
// fail calls on purpose.
//
// Contract: Send() returns a response for every HTTP status (including 4xx/5xx); a transport
// failure (DNS, refused, reset, timeout, local file error) is a non-ok Status: kUnavailable for
// network trouble, kIo for local files. A 2xx body longer than max_bytes (or a Content-Length
// that announces one) is kCorruption; a connection the address guard refused (public_only) is
// kInvalidArgument: retrying cannot help. Redirects are never followed (a 3xx is a response).
// Implementations must be thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "shared/status.h"

namespace gleaner::net {

struct HttpCall {
  std::string method = "GET";
  std::string url;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;           // request body (ignored when upload_file is set)
  std::string upload_file;    // PUT the contents of this file
  std::string download_file;  // 2xx bodies are written here instead of HttpResponse::body
  // > 0 with download_file: ask for the bytes from this offset on (Range: bytes=N-); a 206 is
  // appended to download_file, a 200 (the server ignored the range) replaces it.
  int64_t resume_from = 0;
  // Set: 2xx bodies are passed here chunk by chunk instead; returning false ends the transfer
  // at once and Send() returns the response (status and headers) as received so far.
  std::function<bool(std::string_view chunk)> sink;
  int timeout_ms = 30000;
  // >= 0: the 2xx body (with a 206, counted from resume_from) may hold at most this many bytes:
  // a larger Content-Length is refused before the body, and the transfer ends before the first
  // byte past it is written or passed to the sink.
  int64_t max_bytes = -1;
  // A URL that did not come from the coordinator (a model file on a host the developer chose):
  // every connection goes straight to the host (no proxy, no reused connection) and only to a
  // public address (shared/native/address_guard.h), unless the client allows private ones.
  bool public_only = false;
};

struct HttpResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // lowercase names
  std::string body;
};

class HttpClient {
 public:
  virtual ~HttpClient() = default;
  virtual Result<HttpResponse> Send(const HttpCall& call) = 0;
};

}  // namespace gleaner::net
