// HTTP as the native programs' clients see it (the agent, the gleaner CLI, the coordinator's
// pool providers): one call in, one response out. The libcurl implementation is in
// curl_http.{h,cc} (the only file that talks to libcurl); tests inject their own HttpClient to
// fail calls on purpose.
//
// Contract: Send() returns a response for every HTTP status (including 4xx/5xx); a transport
// failure (DNS, refused, reset, timeout, local file error) is a non-ok Status: kUnavailable for
// network trouble, kIo for local files. Implementations must be thread-safe.
#pragma once

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
  // Set: 2xx bodies are passed here chunk by chunk instead; returning false ends the transfer
  // at once and Send() returns the response (status and headers) as received so far.
  std::function<bool(std::string_view chunk)> sink;
  int timeout_ms = 30000;
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
