// Rate limits (token buckets with an injected clock), jobs per developer and spec size limits.
#include "coordinator/core/rate_limit.h"

#include <map>

#include "coordinator/core/router.h"
#include "tests/unit/core/test_env.h"

using namespace gleaner;
using namespace gleaner::testing;
using core::BucketTable;
using core::ParseRateLimit;
using core::RateLimit;
using core::TakeToken;
using core::TokenBucket;

TEST_CASE("rate limits parse as RATE:BURST or off", "[ratelimit]") {
  auto r = ParseRateLimit("5:60");
  REQUIRE(r.ok());
  CHECK(r->per_second == 5);
  CHECK(r->burst == 60);
  CHECK(core::FormatRateLimit(*r) == "5:60");
  auto frac = ParseRateLimit("0.5:2");
  REQUIRE(frac.ok());
  CHECK(frac->per_second == 0.5);
  CHECK(core::FormatRateLimit(*frac) == "0.5:2");
  for (const char* off : {"off", "0"}) {
    auto o = ParseRateLimit(off);
    REQUIRE(o.ok());
    CHECK_FALSE(o->limited());
    CHECK(core::FormatRateLimit(*o) == "off");
  }
  for (const char* bad :
       {"", "5", "5:", ":5", "-1:5", "5:0", "5:0.5", "a:b", "1e3:5", "5:60:1", "0:10", "nan:1"}) {
    INFO(bad);
    CHECK_FALSE(ParseRateLimit(bad).ok());
  }
}

TEST_CASE("a token bucket allows its burst, then refills at its rate", "[ratelimit]") {
  RateLimit limit{2, 3};  // 2 per second, bursts of 3
  TokenBucket b;
  int64_t t = 1000000;
  for (int i = 0; i < 3; ++i) CHECK(TakeToken(&b, limit, t).allowed);
  auto refused = TakeToken(&b, limit, t);
  CHECK_FALSE(refused.allowed);
  CHECK(refused.retry_after_s == Approx(0.5));
  // 250 ms later half a token is back: still refused, a quarter second to go.
  refused = TakeToken(&b, limit, t + 250);
  CHECK_FALSE(refused.allowed);
  CHECK(refused.retry_after_s == Approx(0.25));
  CHECK(TakeToken(&b, limit, t + 500).allowed);
  CHECK_FALSE(TakeToken(&b, limit, t + 500).allowed);
  // A clock that jumps back refills nothing (and does not go negative).
  CHECK_FALSE(TakeToken(&b, limit, t - 10000).allowed);
  // A long pause refills to the burst, never beyond.
  t += 3600 * 1000;
  for (int i = 0; i < 3; ++i) CHECK(TakeToken(&b, limit, t).allowed);
  CHECK_FALSE(TakeToken(&b, limit, t).allowed);
  // Sustained: one request per 500 ms passes forever.
  for (int i = 1; i <= 100; ++i) CHECK(TakeToken(&b, limit, t + i * 500).allowed);
  // Unlimited never refuses.
  TokenBucket u;
  for (int i = 0; i < 1000; ++i) CHECK(TakeToken(&u, RateLimit{}, t).allowed);
}

TEST_CASE("a bucket table keys buckets and stays bounded", "[ratelimit]") {
  RateLimit limit{1, 2};
  BucketTable table(4);
  int64_t t = 5000;
  for (const char* k : {"a", "b", "c", "d"}) {
    CHECK(table.Take(k, limit, t).allowed);
    CHECK(table.Take(k, limit, t).allowed);
    CHECK_FALSE(table.Take(k, limit, t).allowed);
  }
  CHECK(table.size() == 4);
  // Full table, nobody refilled yet: the oldest half goes ("a" and "b" were touched first? all
  // share one time here, so every bucket at or before the median time goes).
  CHECK(table.Take("e", limit, t).allowed);
  CHECK(table.size() <= 4);
  // Two seconds later every bucket is full again and indistinguishable from a new one: pruned.
  BucketTable t2(3);
  for (const char* k : {"a", "b", "c"}) CHECK(t2.Take(k, limit, t).allowed);
  CHECK(t2.Take("x", limit, t + 2000).allowed);
  CHECK(t2.size() == 1);
  // Drained buckets survive pruning when others are full: "y" is empty, "z" full.
  BucketTable t3(2);
  CHECK(t3.Take("y", limit, t).allowed);
  CHECK(t3.Take("y", limit, t).allowed);
  CHECK(t3.Take("z", limit, t - 5000).allowed);  // full again by t
  CHECK(t3.Take("w", limit, t).allowed);         // prunes z only
  CHECK(t3.size() == 2);
  CHECK_FALSE(t3.Take("y", limit, t).allowed);
}

namespace {

CoreConfig LimitedConfig() {
  CoreConfig c = TestConfig();
  c.developer_rate = {1, 2};
  c.node_rate = {1, 3};
  c.operator_rate = RateLimit{};  // unlimited
  c.enroll_rate = RateLimit{};
  return c;
}

}  // namespace

TEST_CASE("routes answer 429 with Retry-After per token and recover", "[ratelimit]") {
  BucketTable limiter;
  TestEnv env(LimitedConfig(), &limiter);
  std::string dev = env.Developer();
  std::string other = env.Developer();
  CHECK(env.Get("/v1/jobs", dev).status == 200);
  CHECK(env.Get("/v1/jobs", dev).status == 200);
  Resp limited = env.Get("/v1/jobs", dev);
  CHECK(limited.status == 429);
  CHECK(limited.ErrorCode() == "rate_limited");
  CHECK(limited.Header("Retry-After") == "1");
  // Other tokens and unauthenticated requests have their own fate.
  CHECK(env.Get("/v1/jobs", other).status == 200);
  CHECK(env.Get("/v1/jobs", "").status == 401);
  CHECK(env.Get("/v1/jobs", "glt_nobody").status == 401);
  CHECK(env.Get("/healthz", "").status == 200);
  // The operator is unlimited here.
  for (int i = 0; i < 20; ++i) REQUIRE(env.Get("/v1/jobs", env.operator_token).status == 200);
  // A refused request costs nothing: after one second exactly one more passes.
  env.Advance(1.0);
  CHECK(env.Get("/v1/jobs", dev).status == 200);
  CHECK(env.Get("/v1/jobs", dev).status == 429);
  env.Advance(2.0);
  CHECK(env.Get("/v1/jobs", dev).status == 200);
  CHECK(env.Get("/v1/jobs", dev).status == 200);

  // Nodes have their own limit; a 429 on a heartbeat changes nothing.
  std::string job = env.Submit(env.operator_token, 100);
  NodeRef node = env.Node("m1");
  CHECK(env.ClaimedJob(node) == job);
  CHECK(env.Heartbeat(node, job, 1, 5).status == 200);
  CHECK(env.Heartbeat(node, job, 1, 6).status == 200);
  std::string before = env.Snapshot();
  Resp hb = env.Heartbeat(node, job, 1, 7);
  CHECK(hb.status == 429);
  CHECK(hb.Header("Retry-After") == "1");
  CHECK(env.Snapshot() == before);
  env.Advance(1.0);
  CHECK(env.Heartbeat(node, job, 1, 7).status == 200);
}

TEST_CASE("a node heartbeating every 30 s never trips the default node limit", "[ratelimit]") {
  BucketTable limiter;
  CoreConfig c = TestConfig();
  TestEnv env(c, &limiter);
  std::string job = env.Submit(env.operator_token, 1000);
  NodeRef node = env.Node("m1");
  CHECK(env.ClaimedJob(node) == job);
  // An hour of heartbeats, each with a checkpoint, plus a release check and idle work polls.
  for (int i = 1; i <= 120; ++i) {
    env.Advance(30);
    REQUIRE(env.Heartbeat(node, job, 1, i).status == 200);
    REQUIRE(env.Checkpoint(node, job, 1, i).status == 200);
    REQUIRE(env.Get("/v1/agent/release?platform=linux-x86_64&channel=stable", node.token).status !=
            429);
  }
}

TEST_CASE("developers hold at most max_active_jobs pending or running jobs", "[ratelimit]") {
  CoreConfig c = TestConfig();
  c.max_active_jobs = 2;
  TestEnv env(c);
  std::string dev = env.Developer();
  Json body = {{"kind", "synthetic"}, {"params", {{"steps", 10}}}};
  Resp first = env.Post("/v1/jobs", dev, body, {{"idempotency-key", "one"}});
  REQUIRE(first.status == 201);
  env.Submit(dev, 10);
  int64_t jobs = env.Scalar("SELECT COUNT(*) FROM jobs");
  Resp third = env.Post("/v1/jobs", dev, body);
  CHECK(third.status == 429);
  CHECK(third.ErrorCode() == "too_many_jobs");
  CHECK(env.Scalar("SELECT COUNT(*) FROM jobs") == jobs);
  // A replay of an accepted submission is still answered.
  Resp replay = env.Post("/v1/jobs", dev, body, {{"idempotency-key", "one"}});
  CHECK(replay.status == 200);
  CHECK(replay.json["id"] == first.json["id"]);
  // Others and operators are not affected.
  env.Submit(env.Developer(), 10);
  for (int i = 0; i < 3; ++i) env.Submit(env.operator_token, 10);
  // A finished job frees a slot.
  std::string id = first.json["id"].get<std::string>();
  REQUIRE(env.Post("/v1/jobs/" + id + "/cancel", dev).status == 200);
  CHECK(env.Post("/v1/jobs", dev, body).status == 201);
  CHECK(env.Post("/v1/jobs", dev, body).status == 429);
}

TEST_CASE("the active-job counter follows every change of a job's state", "[ratelimit]") {
  CoreConfig c = TestConfig();
  c.stall_after_s = 60;
  TestEnv env(c);
  std::string dev = env.Developer();
  auto check = [&](const char* when) {
    INFO(when);
    CHECK(env.Scalar("SELECT active_jobs FROM api_keys WHERE token_hash = ?", {Sha256Hex(dev)}) ==
          env.Scalar("SELECT count(*) FROM jobs j JOIN api_keys k ON k.id = j.owner_key_id "
                     "WHERE k.token_hash = ? AND j.state IN ('pending', 'running')",
                     {Sha256Hex(dev)}));
    CHECK(env.Scalar("SELECT value FROM counters WHERE name = 'active_jobs'") ==
          env.Scalar("SELECT count(*) FROM jobs WHERE state IN ('pending', 'running')"));
  };
  NodeRef a = env.Node("a"), b = env.Node("b");
  env.Submit(env.operator_token);  // another key's job counts in the total only
  // Priorities fix the claim order: j1, j2, j3, j4.
  std::string j1 = env.Submit(dev, 100, 3);
  std::string j2 = env.Submit(dev, 100, 2, {{"max_failures", 1}});
  std::string j3 = env.Submit(dev, 100, 1), j4 = env.Submit(dev, 100, 0);
  check("submitted");
  REQUIRE(env.ClaimedJob(a) == j1);
  check("claimed");
  REQUIRE(env.Post("/v1/jobs/" + j1 + "/release", a.token, {{"epoch", 1}}).status == 200);
  check("released");
  REQUIRE(env.ClaimedJob(a) == j1);
  REQUIRE(env.Complete(a, j1, 2).status == 200);
  check("completed");
  REQUIRE(env.ClaimedJob(b) == j2);
  REQUIRE(env.Post("/v1/jobs/" + j2 + "/fail", b.token, {{"epoch", 1}, {"reason", "x"}}).status ==
          200);
  CHECK(env.JobState(j2) == "failed");
  check("failed");
  env.Advance(120);  // a's next lease stalls; maintenance leaves it running
  REQUIRE(env.ClaimedJob(a) == j3);
  env.Advance(120);
  REQUIRE(env.Post("/v1/admin/maintenance", env.operator_token).status == 200);
  check("stalled");
  for (const std::string& j : {j1, j2, j3, j4}) env.Post("/v1/jobs/" + j + "/cancel", dev);
  check("canceled");
  CHECK(env.Scalar("SELECT active_jobs FROM api_keys WHERE token_hash = ?", {Sha256Hex(dev)}) == 0);
}

TEST_CASE("job specs over max_spec_bytes are refused with 413", "[ratelimit]") {
  CoreConfig c = TestConfig();
  c.max_spec_bytes = 4096;
  TestEnv env(c);
  std::string dev = env.Developer();
  std::string sha(64, 'a');
  auto body = [&](size_t pad) {
    return Json{
        {"kind", "lora-sd"},
        {"params", {{"steps", 10}}},
        {"model",
         {{"uri", "blob://uploads/u_x/model.safetensors"},
          {"sha256", sha},
          {"config",
           {{"block_out_channels", Json::array({32, 64})}, {"padding", std::string(pad, 'x')}}}}},
        {"dataset", {{"uri", "blob://uploads/u_y/data.safetensors"}, {"sha256", sha}}}};
  };
  Resp big = env.Post("/v1/jobs", dev, body(8000));
  CHECK(big.status == 413);
  CHECK(big.ErrorCode() == "too_large");
  // Under the limit the spec passes the size check (and fails later: no such upload).
  Resp small = env.Post("/v1/jobs", dev, body(100));
  CHECK(small.status == 400);
  CHECK(env.Scalar("SELECT COUNT(*) FROM jobs") == 0);
}

namespace {

// Lets everything through until told to refuse; records the bucket keys it was asked for.
struct SwitchLimiter : core::RateLimiter {
  bool refuse = false;
  std::vector<std::string> keys;
  core::RateDecision Take(const std::string& key, const RateLimit&, int64_t) override {
    keys.push_back(key);
    return refuse ? core::RateDecision{false, 0.2} : core::RateDecision{};
  }
};

}  // namespace

TEST_CASE("every authenticated route answers 429 when the caller's bucket is empty",
          "[ratelimit]") {
  SwitchLimiter limiter;
  TestEnv env(TestConfig(), &limiter);
  std::string dev = env.Developer();
  NodeRef node = env.Node("m1");
  std::string enroll = env.Key("enroll");
  const std::map<unsigned, std::string> token_of = {{core::kRoleDeveloper, dev},
                                                    {core::kRoleNode, node.token},
                                                    {core::kRoleOperator, env.operator_token},
                                                    {core::kRoleEnroll, enroll}};
  env.Get("/v1/jobs", dev);
  CHECK(limiter.keys.back().rfind("developer:k_", 0) == 0);  // one bucket per key id
  limiter.refuse = true;
  std::string before = env.Snapshot();
  int checked = 0;
  for (const core::RouteInfo& route : core::Routes()) {
    if (route.roles == 0) continue;
    std::string path = route.pattern;
    for (const char* param : {"{id}", "{step}"}) {
      size_t at = path.find(param);
      if (at != std::string::npos) path.replace(at, std::string(param).size(), "1");
    }
    for (const auto& [role, token] : token_of) {
      if ((route.roles & role) == 0) continue;
      Resp r = env.Raw(route.method, path, token, route.json_body ? "{}" : "");
      INFO(route.method << " " << path << " as role " << role << ": " << r.body);
      CHECK(r.status == 429);
      CHECK(r.ErrorCode() == "rate_limited");
      CHECK(r.Header("Retry-After") == "1");
      ++checked;
    }
  }
  CHECK(checked >= int(core::Routes().size()) - 1);
  CHECK(env.Snapshot() == before);
  // Public routes and bad tokens never reach the limiter.
  limiter.keys.clear();
  CHECK(env.Get("/healthz", "").status == 200);
  CHECK(env.Get("/v1/jobs", "glt_unknown").status == 401);
  CHECK(limiter.keys.empty());
}
