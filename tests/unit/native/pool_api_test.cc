// Salad and Kubernetes pool providers against a stand-in API server on loopback that checks
// every request's method, path, headers and body; retries; outages; ApplyPoolDecision.
#include <httplib.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <tuple>

#include "coordinator/native/pool/pool_kubernetes.h"
#include "coordinator/native/pool/pool_salad.h"
#include "shared/native/curl_http.h"

using namespace gleaner;
using namespace gleaner::native;

namespace {

struct Seen {
  std::string method, path, body, content_type, api_key, authorization;
};

// A scripted HTTP server: each request is recorded and answered by `answer`.
class StandIn {
 public:
  using Answer = std::function<void(const httplib::Request&, httplib::Response&)>;
  explicit StandIn(Answer answer) : answer_(std::move(answer)) {
    auto h = [this](const httplib::Request& req, httplib::Response& res) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        seen_.push_back({req.method, req.path, req.body, req.get_header_value("Content-Type"),
                         req.get_header_value("Salad-Api-Key"),
                         req.get_header_value("Authorization")});
      }
      answer_(req, res);
    };
    svr_.Get(".*", h);
    svr_.Post(".*", h);
    svr_.Patch(".*", h);
    svr_.Delete(".*", h);
    port_ = svr_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { svr_.listen_after_bind(); });
    while (!svr_.is_running()) std::this_thread::yield();
  }
  ~StandIn() {
    svr_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::vector<Seen> seen() {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_;
  }

 private:
  Answer answer_;
  httplib::Server svr_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::vector<Seen> seen_;
};

PoolApi FastApi() {
  RetryPolicy r;
  r.attempts = 3;
  r.first_backoff_s = 0.01;
  r.max_backoff_s = 0.05;
  r.timeout_ms = 2000;
  return PoolApi(std::make_shared<net::CurlHttpClient>(), r);
}

const std::string kGroup = "/organizations/acme/projects/gleaner/containers/agents";

std::unique_ptr<PoolProvider> Salad(const StandIn& api) {
  SaladOptions o;
  o.api_url = api.url() + "/api/public/";
  o.organization = "acme";
  o.project = "gleaner";
  o.group = "agents";
  o.api_key = "salad-key-123";
  return MakeSaladPool(o, FastApi());
}

// A container group in the given state, answering like SaladCloud's current public API
// (instances carry `id`; counts of allocating, creating, running and stopping instances).
// legacy_ids: instances carry `instance_id` instead, as older API versions did.
struct FakeGroup {
  int replicas = 2;
  int running = 2, allocating = 0, creating = 0, stopping = 0;
  bool legacy_ids = false;
  std::string status = "running";
  void Answer(const httplib::Request& req, httplib::Response& res) {
    const std::string p = "/api/public" + kGroup;
    if (req.method == "GET" && req.path == p) {
      Json g = {{"name", "agents"},
                {"replicas", replicas},
                {"current_state",
                 {{"status", status},
                  {"instance_status_counts",
                   {{"allocating_count", allocating},
                    {"creating_count", creating},
                    {"running_count", running},
                    {"stopping_count", stopping}}}}}};
      res.set_content(DumpJson(g), "application/json");
    } else if (req.method == "PATCH" && req.path == p) {
      auto body = ParseJson(req.body);
      if (body.ok()) replicas = (*body)["replicas"].get<int>();
      res.set_content(req.body, "application/json");
    } else if (req.method == "POST" && (req.path == p + "/start" || req.path == p + "/stop")) {
      status = req.path == p + "/start" ? "running" : "stopped";
      res.status = 202;
    } else if (req.method == "GET" && req.path == p + "/instances") {
      const char* id = legacy_ids ? "instance_id" : "id";
      Json list = Json::array();
      for (auto [i, m, s] :
           {std::tuple{"i-aaa", "m-good", "running"}, std::tuple{"i-bbb", "m-bad", "running"},
            std::tuple{"i-ccc", "m-new", "allocating"}}) {
        list.push_back({{id, i},
                        {"machine_id", m},
                        {"state", s},
                        {"update_time", "2026-11-24T10:00:00Z"},
                        {"version", 1}});
      }
      res.set_content(DumpJson(Json{{"instances", list}}), "application/json");
    } else if (req.method == "POST" && req.path == p + "/instances/i-bbb/reallocate") {
      res.status = 202;
    } else {
      res.status = 404;
      res.set_content(R"({"title":"not found"})", "application/json");
    }
  }
};

}  // namespace

TEST_CASE("salad: reads the group, PATCHes replicas with merge-patch and the API key",
          "[pool][salad]") {
  FakeGroup g;
  StandIn api([&](const httplib::Request& q, httplib::Response& r) { g.Answer(q, r); });
  auto pool = Salad(api);
  CHECK(pool->name() == "salad");
  auto current = pool->Current();
  REQUIRE(current.ok());
  CHECK(*current == 2);
  REQUIRE(pool->SetTarget(5).ok());
  auto seen = api.seen();
  REQUIRE(seen.size() == 3);
  CHECK(seen[1].method == "GET");
  CHECK(seen[2].method == "PATCH");
  CHECK(seen[2].path == "/api/public" + kGroup);
  CHECK(seen[2].content_type == "application/merge-patch+json");
  CHECK(seen[2].body == R"({"replicas":5})");
  for (const Seen& s : seen) CHECK(s.api_key == "salad-key-123");
  CHECK(g.replicas == 5);
  // Same target again: read only, no PATCH.
  REQUIRE(pool->SetTarget(5).ok());
  CHECK(api.seen().size() == 4);
  // Above the API's bound: clamped to 500.
  REQUIRE(pool->SetTarget(9000).ok());
  CHECK(api.seen().back().body == R"({"replicas":500})");
}

TEST_CASE("salad: target 0 stops the group, a later target starts it again", "[pool][salad]") {
  FakeGroup g;
  StandIn api([&](const httplib::Request& q, httplib::Response& r) { g.Answer(q, r); });
  auto pool = Salad(api);
  REQUIRE(pool->SetTarget(0).ok());
  auto seen = api.seen();
  REQUIRE(seen.size() == 2);
  CHECK(seen[1].method == "POST");
  CHECK(seen[1].path == "/api/public" + kGroup + "/stop");
  CHECK(g.status == "stopped");
  CHECK(*pool->Current() == 0);      // a stopped group runs nothing
  REQUIRE(pool->SetTarget(0).ok());  // already stopped: nothing sent but the read
  CHECK(api.seen().size() == 4);
  REQUIRE(pool->SetTarget(3).ok());
  seen = api.seen();
  REQUIRE(seen.size() == 7);
  CHECK(seen[5].method == "PATCH");
  CHECK(seen[5].body == R"({"replicas":3})");
  CHECK(seen[6].method == "POST");
  CHECK(seen[6].path == "/api/public" + kGroup + "/start");
  CHECK(g.status == "running");
}

TEST_CASE("salad: counts running and starting instances, not stopping ones", "[pool][salad]") {
  FakeGroup g;
  g.replicas = 10;
  g.running = 3;
  g.allocating = 2;
  g.creating = 1;
  g.stopping = 4;
  StandIn api([&](const httplib::Request& q, httplib::Response& r) { g.Answer(q, r); });
  auto current = Salad(api)->Current();
  REQUIRE(current.ok());
  CHECK(*current == 6);
}

TEST_CASE("salad: names that are not SaladCloud names are refused before any call",
          "[pool][salad]") {
  FakeGroup g;
  StandIn api([&](const httplib::Request& q, httplib::Response& r) { g.Answer(q, r); });
  for (const char* bad : {"", "a", "Acme", "acme-", "1acme", "ac/me", "ac..me", "acme?x=1"}) {
    INFO(bad);
    SaladOptions o;
    o.api_url = api.url();
    o.organization = bad;
    o.project = "gleaner";
    o.group = "agents";
    o.api_key = "k";
    CHECK(CheckSaladNames(o).code() == Code::kInvalidArgument);
    auto pool = MakeSaladPool(o, FastApi());
    CHECK(pool->Current().status().code() == Code::kInvalidArgument);
    CHECK(pool->SetTarget(1).code() == Code::kInvalidArgument);
  }
  CHECK(api.seen().empty());
  SaladOptions good;
  good.organization = "acme-2";
  good.project = "gleaner";
  good.group = std::string(63, 'a');
  CHECK(CheckSaladNames(good).ok());
}

TEST_CASE("salad: reallocates the instance that runs a quarantined machine", "[pool][salad]") {
  for (bool legacy : {false, true}) {
    INFO((legacy ? "instance_id" : "id"));
    FakeGroup g;
    g.legacy_ids = legacy;
    StandIn api([&](const httplib::Request& q, httplib::Response& r) { g.Answer(q, r); });
    auto pool = Salad(api);
    auto list = pool->Instances();
    REQUIRE(list.ok());
    REQUIRE(list->size() == 3);
    CHECK((*list)[1].id == "i-bbb");
    CHECK((*list)[1].machine_id == "m-bad");
    CHECK((*list)[2].state == "allocating");
    auto r = pool->Reallocate("m-bad");
    REQUIRE(r.ok());
    CHECK(*r);
    auto seen = api.seen();
    CHECK(seen.back().method == "POST");
    CHECK(seen.back().path == "/api/public" + kGroup + "/instances/i-bbb/reallocate");
    CHECK(seen.back().api_key == "salad-key-123");
    auto missing = pool->Reallocate("m-unknown");
    REQUIRE(missing.ok());
    CHECK_FALSE(*missing);
    CHECK(api.seen().back().method == "GET");  // looked, found nothing, sent nothing
  }
}

TEST_CASE("salad: 429 and 5xx are retried with backoff, an outage is an error, not a crash",
          "[pool][salad]") {
  FakeGroup g;
  int calls = 0;
  StandIn api([&](const httplib::Request& q, httplib::Response& r) {
    ++calls;
    if (calls == 1) {
      r.status = 429;
      r.set_header("Retry-After", "0");
      return;
    }
    if (calls == 2) {
      r.status = 503;
      return;
    }
    g.Answer(q, r);
  });
  auto pool = Salad(api);
  auto current = pool->Current();
  REQUIRE(current.ok());
  CHECK(calls == 3);
  // Always failing: the last answer after `attempts` tries.
  StandIn down([&](const httplib::Request&, httplib::Response& r) { r.status = 502; });
  auto broken = Salad(down);
  auto c = broken->Current();
  REQUIRE_FALSE(c.ok());
  CHECK(c.status().message().find("HTTP 502") != std::string::npos);
  CHECK(down.seen().size() == 3);
  CHECK_FALSE(broken->SetTarget(4).ok());
  // A 4xx is not retried.
  StandIn denied([&](const httplib::Request&, httplib::Response& r) { r.status = 403; });
  CHECK_FALSE(Salad(denied)->Current().ok());
  CHECK(denied.seen().size() == 1);
  // Nothing listening at all.
  SaladOptions o;
  o.api_url = "http://127.0.0.1:1";
  o.organization = o.project = o.group = "xy";
  o.api_key = "k";
  CHECK_FALSE(MakeSaladPool(o, FastApi())->Current().ok());
}

TEST_CASE("kubernetes: scale subresource with bearer token and merge-patch, pod deletion",
          "[pool][kubernetes]") {
  const std::string scale = "/apis/apps/v1/namespaces/train/deployments/agents/scale";
  int spec = 1, status = 1;
  StandIn api([&](const httplib::Request& req, httplib::Response& res) {
    if (req.method == "GET" && req.path == scale) {
      res.set_content(DumpJson(Json{{"kind", "Scale"},
                                    {"spec", {{"replicas", spec}}},
                                    {"status", {{"replicas", status}}}}),
                      "application/json");
    } else if (req.method == "PATCH" && req.path == scale) {
      auto body = ParseJson(req.body);
      spec = (*body)["spec"]["replicas"].get<int>();
      res.set_content(req.body, "application/json");
    } else if (req.method == "GET" && req.path == "/api/v1/namespaces/train/pods") {
      CHECK(req.get_param_value("labelSelector") == "app=gleaner-agent");
      res.set_content(
          R"({"items":[{"metadata":{"name":"agents-7d9-x1"},"status":{"phase":"Running"}}]})",
          "application/json");
    } else if (req.method == "DELETE" &&
               req.path == "/api/v1/namespaces/train/pods/agents-7d9-x1") {
      res.set_content("{}", "application/json");
    } else {
      res.status = 404;
      res.set_content(R"({"kind":"Status","code":404})", "application/json");
    }
  });
  char tmpl[] = "/tmp/gleaner-k8s-token-XXXXXX";
  int fd = mkstemp(tmpl);
  REQUIRE(fd >= 0);
  REQUIRE(write(fd, "tok-abc\n", 8) == 8);
  close(fd);
  KubernetesOptions o;
  o.api_url = api.url();
  o.ns = "train";
  o.deployment = "agents";
  o.label_selector = "app=gleaner-agent";
  o.token_file = tmpl;
  auto pool = MakeKubernetesPool(o, FastApi());
  CHECK(pool->name() == "kubernetes");
  REQUIRE(*pool->Current() == 1);
  REQUIRE(pool->SetTarget(3).ok());
  auto seen = api.seen();
  REQUIRE(seen.size() == 3);
  CHECK(seen[2].method == "PATCH");
  CHECK(seen[2].path == scale);
  CHECK(seen[2].content_type == "application/merge-patch+json");
  CHECK(seen[2].body == R"({"spec":{"replicas":3}})");
  for (const Seen& s : seen) CHECK(s.authorization == "Bearer tok-abc");
  CHECK(spec == 3);
  REQUIRE(pool->SetTarget(3).ok());  // unchanged: no PATCH
  CHECK(api.seen().size() == 4);
  auto pods = pool->Instances();
  REQUIRE(pods.ok());
  REQUIRE(pods->size() == 1);
  CHECK((*pods)[0].machine_id == "agents-7d9-x1");
  CHECK(*pool->Reallocate("agents-7d9-x1"));
  CHECK(api.seen().back().method == "DELETE");
  CHECK_FALSE(*pool->Reallocate("agents-gone"));       // 404: already gone
  CHECK_FALSE(*pool->Reallocate("../../etc/passwd"));  // not a pod name: nothing sent
  CHECK(api.seen().back().path == "/api/v1/namespaces/train/pods/agents-gone");
  std::remove(tmpl);
}

namespace {
class RecordingPool : public PoolProvider {
 public:
  std::vector<std::string> calls;
  std::string name() const override { return "fake"; }
  Result<int> Current() override { return 0; }
  Status SetTarget(int t) override {
    calls.push_back("target " + std::to_string(t));
    return Status::Ok();
  }
  Result<std::vector<PoolInstance>> Instances() override { return std::vector<PoolInstance>{}; }
  Result<bool> Reallocate(const std::string& m) override {
    calls.push_back("reallocate " + m);
    if (m == "flaky" && ++flaky_calls == 1) return Status::Unavailable("API down");
    return true;
  }
  int flaky_calls = 0;
};
}  // namespace

TEST_CASE("ApplyPoolActions: each quarantined machine once (retried after failures), then target",
          "[pool]") {
  RecordingPool pool;
  std::set<std::string> done;
  core::PoolActions tick;
  tick.reallocate = {{"n_1", "bad"}, {"n_2", "flaky"}};
  tick.target = 7;
  ApplyPoolActions(&pool, tick, &done);
  ApplyPoolActions(&pool, tick, &done);
  std::vector<std::string> want = {"reallocate bad", "reallocate flaky", "target 7",
                                   "reallocate flaky", "target 7"};
  CHECK(pool.calls == want);
  ApplyPoolActions(&pool, core::PoolActions{}, &done);  // no decision: nothing happens
  CHECK(pool.calls.size() == 5);
}
