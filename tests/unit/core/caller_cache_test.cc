// Remembered callers (caller_cache.h): one round trip per request for a known token, and the
// same answers as without the cache whenever the token's caller changed in between.
#include "coordinator/core/caller_cache.h"

#include "tests/unit/core/test_env.h"

using namespace gleaner;
using namespace gleaner::testing;

namespace {

// Batches (round trips) one request took.
template <typename F>
int64_t Trips(TestEnv& env, F&& request) {
  int64_t before = env.batches;
  request();
  return env.batches - before;
}

}  // namespace

TEST_CASE("a remembered caller saves the lookup round trip", "[callers]") {
  core::CallerTable callers;
  TestEnv env(TestConfig(), nullptr, &callers);
  std::string dev = env.Developer();
  NodeRef node = env.Node("m1");
  env.Submit(dev);
  std::string job = env.ClaimedJob(node);

  Resp first, second;
  CHECK(Trips(env, [&] { first = env.Heartbeat(node, job, 1, 5); }) == 1);  // node seen: claim
  CHECK(Trips(env, [&] { second = env.Heartbeat(node, job, 1, 6); }) == 1);
  CHECK(first.status == 200);
  CHECK(second.status == 200);
  CHECK(env.Scalar("SELECT heartbeats FROM segments WHERE job_id = ?", {job}) == 2);

  // The same answers as a coordinator that looks every token up.
  TestEnv plain;
  std::string dev2 = plain.Developer();
  NodeRef node2 = plain.Node("m1");
  plain.Submit(dev2);
  std::string job2 = plain.ClaimedJob(node2);
  Resp p;
  CHECK(Trips(plain, [&] { p = plain.Heartbeat(node2, job2, 1, 5); }) == 2);
  CHECK(p.json["cancel"] == first.json["cancel"]);
  CHECK(plain.Heartbeat(node2, job2, 1, 10).status == env.Heartbeat(node, job, 1, 10).status);
  CHECK(plain.Heartbeat(node2, job2, 2, 11).body == env.Heartbeat(node, job, 2, 11).body);
  CHECK(plain.Heartbeat(node2, "j_nope", 1, 11).body == env.Heartbeat(node, "j_nope", 1, 11).body);
}

TEST_CASE("a revoked key is refused and changes nothing, though it was remembered", "[callers]") {
  core::CallerTable callers;
  TestEnv env(TestConfig(), nullptr, &callers);
  std::string dev = env.Developer();
  env.Submit(dev);
  CHECK(Trips(env, [&] { env.Submit(dev); }) == 1);
  env.Query("UPDATE api_keys SET revoked_at = 1 WHERE token_hash = ?", {Sha256Hex(dev)});
  const std::string before = env.Snapshot();
  Resp r;
  int64_t trips = Trips(env, [&] {
    r = env.Post("/v1/jobs", dev, {{"kind", "synthetic"}, {"params", {{"steps", 10}}}});
  });
  CHECK(r.status == 401);
  CHECK(trips == 2);  // the checked batch failed and was rolled back; the lookup answered
  CHECK(env.Snapshot() == before);
  core::Caller c;
  CHECK_FALSE(callers.Find(Sha256Hex(dev), &c));
  CHECK(env.Post("/v1/jobs", dev, {{"kind", "synthetic"}}).status == 401);
}

TEST_CASE("node state and re-registration are seen at once through the cache", "[callers]") {
  core::CallerTable callers;
  TestEnv env(TestConfig(), nullptr, &callers);
  std::string dev = env.Developer();
  NodeRef node = env.Node("m1");
  env.Submit(dev);
  env.Submit(dev);
  std::string first = env.ClaimedJob(node);  // remembered as active

  REQUIRE(env.Post("/v1/nodes/" + node.id + "/quarantine", env.operator_token, {{"reason", "test"}})
              .status == 200);
  Resp q = env.Claim(node);
  CHECK(q.status == 204);
  CHECK(q.Header("Gleaner-Node-State") == "quarantined");
  CHECK(env.Scalar("SELECT count(*) FROM jobs WHERE state = 'pending'") == 1);
  // A quarantined node may finish its lease (one lease per node: it must, to claim again).
  REQUIRE(env.Complete(node, first, 1).status == 200);

  // Remembered as quarantined; the handler answers without a batch, so the token is looked up.
  REQUIRE(env.Post("/v1/nodes/" + node.id + "/restore", env.operator_token).status == 200);
  CHECK(env.Claim(node).status == 200);

  // A new registration of the machine replaces the token: the old one stops working at once.
  NodeRef again = env.Node("m1", 8000, "RTX 3060");
  CHECK(env.Claim(node).status == 401);
  core::Caller c;
  REQUIRE(env.Claim(again).status == 204);  // no job is left (and it holds a lease)
  CHECK(callers.Find(Sha256Hex(again.token), &c));
  CHECK(c.vram_mb == 8000);
}

TEST_CASE("a remembered caller is rate limited once per request", "[callers]") {
  core::CoreConfig config = TestConfig();
  config.node_rate = {0.001, 3};
  core::BucketTable limiter;
  core::CallerTable callers;
  TestEnv env(config, &limiter, &callers);
  std::string dev = env.Developer();
  NodeRef node = env.Node("m1");
  env.Submit(dev);
  std::string job = env.ClaimedJob(node);  // token 1 of 3; remembered
  // A 400 answered without a batch goes through the lookup; it must not take a second token.
  CHECK(env.Post("/v1/jobs/" + job + "/heartbeat", node.token, {{"epoch", "x"}}).status == 400);
  CHECK(env.Heartbeat(node, job, 1, 1).status == 200);  // token 3
  Resp limited = env.Heartbeat(node, job, 1, 2);
  CHECK(limited.status == 429);
  CHECK(limited.ErrorCode() == "rate_limited");
}

TEST_CASE("the caller table is bounded", "[callers]") {
  core::CallerTable table(2);
  core::Caller a;
  a.id = "k_a";
  table.Remember("h1", a);
  table.Remember("h2", a);
  table.Remember("h2", a);  // an update never evicts
  CHECK(table.size() == 2);
  table.Remember("h3", a);
  CHECK(table.size() == 1);
  core::Caller out;
  CHECK(table.Find("h3", &out));
  CHECK(out.id == "k_a");
  table.Forget("h3");
  CHECK_FALSE(table.Find("h3", &out));
}
