// DeletionCost against a stand-in instance metadata service on loopback (cpp-httplib) that
// checks every request's method, path, headers and body; failures, outages, the newest value
// winning, and when the module is enabled at all.
#include "agent/supervisor/deletion_cost.h"

#include <httplib.h>
#include <stdlib.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "fake_http.h"
#include "shared/native/curl_http.h"
#include "tests/scoped_env.h"

using namespace gleaner;
using namespace gleaner::agent;
using gleaner::testing::ScopedEnv;

namespace {

struct Seen {
  std::string method, path, metadata, content_type, forwarded, body;
  int status = 0;
};

// A stand-in IMDS: records each request; `status_for(n)` answers the n-th (0-based) one.
class Imds {
 public:
  explicit Imds(std::function<int(size_t)> status_for = [](size_t) { return 204; })
      : status_for_(std::move(status_for)) {
    auto h = [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard<std::mutex> lock(mu_);
      res.status = status_for_(seen_.size());
      seen_.push_back({req.method, req.path, req.get_header_value("Metadata"),
                       req.get_header_value("Content-Type"),
                       req.get_header_value("X-Forwarded-For"), req.body, res.status});
      cv_.notify_all();
    };
    svr_.Put(".*", h);
    svr_.Get(".*", h);
    svr_.Post(".*", h);
    port_ = svr_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { svr_.listen_after_bind(); });
    while (!svr_.is_running()) std::this_thread::yield();
  }
  ~Imds() {
    svr_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  // Waits until a request answered 2xx carried `body`; every request seen so far is returned.
  std::vector<Seen> WaitAccepted(const std::string& body, double timeout_s = 10) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::duration<double>(timeout_s), [&] {
      return !seen_.empty() && seen_.back().body == body && seen_.back().status / 100 == 2;
    });
    return seen_;
  }
  size_t count() {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_.size();
  }

 private:
  std::function<int(size_t)> status_for_;
  httplib::Server svr_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Seen> seen_;
};

DeletionCostOptions Fast(const std::string& url) {
  DeletionCostOptions o;
  o.base_url = url;
  o.retry_min_s = 0.01;
  o.retry_max_s = 0.05;
  o.timeout_ms = 1000;
  return o;
}

const std::string kIdle = R"({"deletion_cost":0})";
const std::string kBusy = R"({"deletion_cost":1000})";

}  // namespace

TEST_CASE("deletion cost: idle at start, busy during a job, idle after, as the IMDS expects") {
  Imds imds;
  net::CurlHttpClient http;
  DeletionCost cost(Fast(imds.url() + "/"), &http);  // a trailing '/' is tolerated
  REQUIRE(cost.enabled());
  std::vector<Seen> seen = imds.WaitAccepted(kIdle);
  REQUIRE(seen.size() == 1);
  cost.SetBusy(true);
  seen = imds.WaitAccepted(kBusy);
  REQUIRE(seen.size() == 2);
  cost.SetBusy(false);
  seen = imds.WaitAccepted(kIdle);
  REQUIRE(seen.size() == 3);
  for (const Seen& s : seen) {
    CHECK(s.method == "PUT");
    CHECK(s.path == "/v1/deletion-cost");
    CHECK(s.metadata == "true");
    CHECK(s.content_type == "application/json");
    CHECK(s.forwarded.empty());  // the IMDS refuses X-Forwarded-* headers
  }
  CHECK(seen[0].body == kIdle);
  CHECK(seen[1].body == kBusy);
  CHECK(seen[2].body == kIdle);
  // Setting the value it already has sends nothing: the next request is the next change.
  cost.SetBusy(false);
  cost.SetBusy(false);
  cost.SetBusy(true);
  seen = imds.WaitAccepted(kBusy);
  CHECK(seen.size() == 4);
}

TEST_CASE("deletion cost: HTTP errors are retried until the service accepts the value") {
  // The first three requests fail (500, 403, 503), then everything is accepted.
  const int codes[] = {500, 403, 503};
  Imds imds([&](size_t n) { return n < 3 ? codes[n] : 204; });
  net::CurlHttpClient http;
  DeletionCost cost(Fast(imds.url()), &http);
  std::vector<Seen> seen = imds.WaitAccepted(kIdle);
  REQUIRE(seen.size() == 4);
  CHECK(seen[3].status == 204);
  cost.SetBusy(true);
  seen = imds.WaitAccepted(kBusy);
  CHECK(seen.back().body == kBusy);
}

TEST_CASE("deletion cost: while the service fails, the newest value wins") {
  std::mutex mu;
  bool up = false;
  Imds imds([&](size_t) {
    std::lock_guard<std::mutex> lock(mu);
    return up ? 204 : 500;
  });
  net::CurlHttpClient http;
  DeletionCost cost(Fast(imds.url()), &http);
  cost.SetBusy(true);
  cost.SetBusy(false);
  cost.SetBusy(true);
  {
    std::lock_guard<std::mutex> lock(mu);
    up = true;
  }
  std::vector<Seen> seen = imds.WaitAccepted(kBusy);
  REQUIRE(!seen.empty());
  CHECK(seen.back().body == kBusy);
  CHECK(seen.back().status == 204);
}

TEST_CASE("deletion cost: an unreachable service never blocks the caller") {
  // A port with nothing listening: every PUT is refused; SetBusy and the destructor return at
  // once (the destructor waits for at most the one request in flight).
  int dead_port = 0;
  {
    Imds gone;
    dead_port = std::stoi(gone.url().substr(gone.url().rfind(':') + 1));
  }
  net::CurlHttpClient http;
  auto t0 = std::chrono::steady_clock::now();
  {
    DeletionCost cost(Fast("http://127.0.0.1:" + std::to_string(dead_port)), &http);
    for (int i = 0; i < 100; ++i) cost.SetBusy(i % 2 == 0);
  }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(s < 1.5);
}

TEST_CASE("deletion cost: disabled off the platform, and no request is ever made") {
  testing::FakeHttp http(
      [](const net::HttpCall&) -> Result<net::HttpResponse> { return testing::Reply(204); });
  {
    DeletionCost cost(DeletionCostOptions{}, &http);
    CHECK_FALSE(cost.enabled());
    cost.SetBusy(true);
    cost.SetBusy(false);
  }
  CHECK(http.calls().empty());
}

TEST_CASE("deletion cost: the environment decides where (and whether) to send") {
  {
    ScopedEnv a("GLEANER_IMDS_URL", nullptr), b("SALAD_MACHINE_ID", nullptr);
    CHECK(DeletionCostFromEnv().base_url.empty());
  }
  {
    ScopedEnv a("GLEANER_IMDS_URL", nullptr), b("SALAD_MACHINE_ID", "m-123");
    CHECK(DeletionCostFromEnv().base_url == "http://169.254.169.254");
  }
  {
    ScopedEnv a("GLEANER_IMDS_URL", "http://127.0.0.1:8080/"), b("SALAD_MACHINE_ID", "m-123");
    CHECK(DeletionCostFromEnv().base_url == "http://127.0.0.1:8080");
  }
  {
    ScopedEnv a("GLEANER_IMDS_URL", "off"), b("SALAD_MACHINE_ID", "m-123");
    CHECK(DeletionCostFromEnv().base_url.empty());
  }
  {
    ScopedEnv a("GLEANER_IMDS_URL", ""), b("SALAD_MACHINE_ID", "");
    CHECK(DeletionCostFromEnv().base_url.empty());
  }
}
