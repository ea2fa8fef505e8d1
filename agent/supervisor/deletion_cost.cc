#include "agent/supervisor/deletion_cost.h"

#include <chrono>
#include <cstdlib>

#include "agent/supervisor/backoff.h"
#include "agent/supervisor/log.h"

namespace gleaner::agent {

namespace {

constexpr const char* kSaladImds = "http://169.254.169.254";

DeletionCostOptions WithoutTrailingSlash(DeletionCostOptions o) {
  while (!o.base_url.empty() && o.base_url.back() == '/') o.base_url.pop_back();
  return o;
}

}  // namespace

DeletionCostOptions DeletionCostFromEnv() {
  DeletionCostOptions o;
  const char* url = std::getenv("GLEANER_IMDS_URL");
  const char* salad = std::getenv("SALAD_MACHINE_ID");
  if (url != nullptr && *url != '\0') {
    o.base_url = std::string(url) == "off" ? "" : url;
  } else if (salad != nullptr && *salad != '\0') {
    o.base_url = kSaladImds;
  }
  return WithoutTrailingSlash(o);
}

DeletionCost::DeletionCost(DeletionCostOptions options, net::HttpClient* http)
    : options_(WithoutTrailingSlash(std::move(options))), http_(http), wanted_(options_.idle_cost) {
  if (enabled()) thread_ = std::thread([this] { Loop(); });
}

DeletionCost::~DeletionCost() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void DeletionCost::SetBusy(bool busy) {
  if (!enabled()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    wanted_ = busy ? options_.busy_cost : options_.idle_cost;
  }
  cv_.notify_all();
}

void DeletionCost::Loop() {
  Backoff backoff(options_.retry_min_s, options_.retry_max_s);
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    if (have_sent_ && sent_ == wanted_) {
      cv_.wait(lock, [this] { return stop_ || sent_ != wanted_; });
      continue;
    }
    int64_t cost = wanted_;
    lock.unlock();
    Status s = Put(cost);
    lock.lock();
    if (s.ok()) {
      have_sent_ = true;
      sent_ = cost;
      backoff.Reset();
      continue;
    }
    double d = backoff.Next();
    Log("deletion cost %lld: %s (retrying in %.1fs)", static_cast<long long>(cost),
        s.ToString().c_str(), d);
    cv_.wait_for(lock, std::chrono::duration<double>(d),
                 [this, cost] { return stop_ || wanted_ != cost; });
  }
}

Status DeletionCost::Put(int64_t cost) {
  net::HttpCall call;
  call.method = "PUT";
  call.url = options_.base_url + "/v1/deletion-cost";
  call.headers = {{"Metadata", "true"}, {"Content-Type", "application/json"}};
  call.body = "{\"deletion_cost\":" + std::to_string(cost) + "}";
  call.timeout_ms = options_.timeout_ms;
  Result<net::HttpResponse> r = http_->Send(call);
  if (!r.ok()) return r.status();
  if (r->status / 100 != 2) {
    return Status::Unavailable("IMDS answered HTTP " + std::to_string(r->status));
  }
  return Status::Ok();
}

}  // namespace gleaner::agent
