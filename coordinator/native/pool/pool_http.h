// The pool providers' HTTP calls (SaladCloud, Kubernetes): libcurl through the agent's
// HttpClient, retried with exponential backoff on transport errors, 429 and 5xx (a 429's
// Retry-After is honoured up to max_backoff). Other statuses are returned to the caller.
#pragma once

#include <memory>
#include <string>

#include "shared/json.h"
#include "shared/native/http_client.h"
#include "shared/status.h"

namespace gleaner::native {

struct RetryPolicy {
  int attempts = 4;              // total tries
  double first_backoff_s = 0.5;  // then doubling
  double max_backoff_s = 8;
  int timeout_ms = 10000;  // per try
};

class PoolApi {
 public:
  PoolApi(std::shared_ptr<net::HttpClient> http, RetryPolicy retry)
      : http_(std::move(http)), retry_(retry) {}

  // Sends the call with retries. The final response (any status) or the last transport error.
  Result<net::HttpResponse> Send(net::HttpCall call) const;
  // Send, then require 2xx and (when the body is not empty) a JSON object body.
  Result<Json> SendJson(net::HttpCall call, const std::string& what) const;

 private:
  std::shared_ptr<net::HttpClient> http_;
  RetryPolicy retry_;
};

}  // namespace gleaner::native
