#include "coordinator/native/pool/pool_http.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>

namespace gleaner::native {

Result<net::HttpResponse> PoolApi::Send(net::HttpCall call) const {
  call.timeout_ms = retry_.timeout_ms;
  double backoff = retry_.first_backoff_s;
  Result<net::HttpResponse> last = Status::Unavailable("no attempt made");
  for (int attempt = 1; attempt <= std::max(1, retry_.attempts); ++attempt) {
    last = http_->Send(call);
    bool retry = !last.ok() || last->status == 429 || last->status >= 500;
    if (!retry || attempt == retry_.attempts) return last;
    double wait = backoff;
    if (last.ok() && last->status == 429) {
      auto it = last->headers.find("retry-after");
      if (it != last->headers.end()) {
        double s = std::strtod(it->second.c_str(), nullptr);
        if (s > 0) wait = std::min(s, retry_.max_backoff_s);
      }
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(wait));
    backoff = std::min(backoff * 2, retry_.max_backoff_s);
  }
  return last;
}

Result<Json> PoolApi::SendJson(net::HttpCall call, const std::string& what) const {
  std::string method = call.method;
  auto resp = Send(std::move(call));
  if (!resp.ok()) return Status::Unavailable(what + ": " + resp.status().message());
  if (resp->status < 200 || resp->status >= 300) {
    std::string body = resp->body.substr(0, 300);
    Status st = Status::Unavailable(what + ": HTTP " + std::to_string(resp->status) + " " + body);
    if (resp->status == 404) return Status::NotFound(st.message());
    return st;
  }
  if (resp->body.empty()) return Json::object();
  auto parsed = ParseJson(resp->body);
  if (!parsed.ok() || !parsed->is_object()) {
    return Status::Unavailable(what + ": the answer is not a JSON object");
  }
  return std::move(parsed).value();
}

}  // namespace gleaner::native
