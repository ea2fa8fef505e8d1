// An HttpClient for tests: a handler decides every response; calls are recorded.
#pragma once

#include <functional>
#include <mutex>
#include <vector>

#include "shared/native/http_client.h"

namespace gleaner::testing {

class FakeHttp : public agent::HttpClient {
 public:
  using Handler = std::function<Result<agent::HttpResponse>(const agent::HttpCall&)>;
  explicit FakeHttp(Handler h) : handler_(std::move(h)) {}
  Result<agent::HttpResponse> Send(const agent::HttpCall& call) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      calls_.push_back(call.method + " " + call.url);
    }
    return handler_(call);
  }
  std::vector<std::string> calls() {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }

 private:
  Handler handler_;
  std::mutex mu_;
  std::vector<std::string> calls_;
};

inline agent::HttpResponse Reply(int status, const std::string& body = "{}") {
  agent::HttpResponse r;
  r.status = status;
  r.body = body;
  return r;
}

}  // namespace gleaner::testing
