// An HttpClient for tests: a handler decides every response; calls are recorded.
#pragma once

#include <functional>
#include <mutex>
#include <vector>

#include "shared/native/http_client.h"

namespace gleaner::testing {

class FakeHttp : public net::HttpClient {
 public:
  using Handler = std::function<Result<net::HttpResponse>(const net::HttpCall&)>;
  explicit FakeHttp(Handler h) : handler_(std::move(h)) {}
  Result<net::HttpResponse> Send(const net::HttpCall& call) override {
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

inline net::HttpResponse Reply(int status, const std::string& body = "{}") {
  net::HttpResponse r;
  r.status = status;
  r.body = body;
  return r;
}

}  // namespace gleaner::testing
