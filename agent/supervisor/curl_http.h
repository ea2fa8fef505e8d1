// HttpClient over libcurl (the one adapter file for libcurl: its error codes become Status here).
// Thread-safe: each thread reuses its own easy handle (keep-alive per thread).
#pragma once

#include "agent/supervisor/http_client.h"

namespace gleaner::agent {

class CurlHttpClient : public HttpClient {
 public:
  CurlHttpClient();  // calls curl_global_init once per process
  Result<HttpResponse> Send(const HttpCall& call) override;
};

}  // namespace gleaner::agent
