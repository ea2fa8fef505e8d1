// The autoscaler's decision: pure function, and as recorded by the maintenance tick with the
// test clock (warm buffer for idle_window, then scale to zero; provider's count recorded).
#include "coordinator/core/autoscaler.h"

#include "tests/unit/core/test_env.h"

using namespace gleaner;
using namespace gleaner::testing;

namespace {

core::AutoscaleDecision Decide(int64_t running, int64_t pending, int64_t warm, int64_t lo,
                               int64_t hi) {
  core::AutoscaleInputs in;
  in.running = running;
  in.pending = pending;
  in.warm_nodes = warm;
  in.min_nodes = lo;
  in.max_nodes = hi;
  return core::DecideTarget(in);
}

Json Tick(TestEnv& env, core::PoolObservation pool = {}) {
  core::Plan p = core::Drive(env.coord.MaintenancePlan(env.now_ms, pool), *env.db);
  REQUIRE(p.response().status == 200);
  auto parsed = ParseJson(p.response().body);
  REQUIRE(parsed.ok());
  return *parsed;
}

}  // namespace

TEST_CASE("DecideTarget clamps demand and keeps warm nodes", "[autoscaler]") {
  CHECK(Decide(0, 0, 0, 0, 40).target == 0);
  CHECK(Decide(0, 0, 0, 0, 40).reason == "idle");
  CHECK(Decide(3, 4, 0, 0, 40).target == 7);
  CHECK(Decide(3, 4, 0, 0, 40).reason == "demand");
  CHECK(Decide(30, 400, 0, 0, 40).target == 40);
  CHECK(Decide(30, 400, 0, 0, 40).reason == "max");
  CHECK(Decide(0, 0, 0, 2, 40).target == 2);
  CHECK(Decide(0, 0, 0, 2, 40).reason == "min");
  // Warm nodes hold the pool up when demand drops, never above max.
  CHECK(Decide(1, 0, 5, 0, 40).target == 5);
  CHECK(Decide(1, 0, 5, 0, 40).reason == "warm");
  CHECK(Decide(1, 0, 50, 0, 40).target == 40);
  CHECK(Decide(9, 0, 5, 0, 40).target == 9);
  // Garbage counts never produce a negative target.
  CHECK(Decide(-5, -5, -1, 0, 40).target == 0);
}

TEST_CASE("tick: warm buffer for idle_window after the last completion, then zero",
          "[autoscaler][maintenance]") {
  auto config = TestConfig();
  config.autoscale_min = 0;
  config.autoscale_max = 10;
  config.autoscale_idle_window_s = 300;
  TestEnv env(config);
  std::string dev = env.Developer();
  std::vector<NodeRef> nodes;
  std::vector<std::string> jobs;
  for (int i = 0; i < 3; ++i) {
    jobs.push_back(env.Submit(dev));
    nodes.push_back(env.Node("m" + std::to_string(i)));
  }
  Json t = Tick(env);
  CHECK(t["autoscaler"]["pending"] == 3);
  CHECK(t["autoscaler"]["target"] == 3);
  for (int i = 0; i < 3; ++i) env.ClaimedJob(nodes[size_t(i)]);
  CHECK(Tick(env)["autoscaler"]["target"] == 3);
  // All three complete: no demand, but the nodes stay warm for the idle window.
  for (int i = 0; i < 3; ++i) {
    Rows r = env.Query("SELECT id FROM jobs WHERE node_id = ?", {nodes[size_t(i)].id});
    REQUIRE(env.Complete(nodes[size_t(i)], r.rows[0][0].AsText(), 1).status == 200);
  }
  t = Tick(env);
  CHECK(t["autoscaler"]["running"] == 0);
  CHECK(t["autoscaler"]["pending"] == 0);
  CHECK(t["autoscaler"]["warm"] == 3);
  CHECK(t["autoscaler"]["target"] == 3);
  CHECK(t["autoscaler"]["reason"] == "warm");
  env.Advance(299);
  CHECK(Tick(env)["autoscaler"]["target"] == 3);
  env.Advance(2);  // past the window: scale to zero
  t = Tick(env);
  CHECK(t["autoscaler"]["target"] == 0);
  CHECK(t["autoscaler"]["reason"] == "idle");
  // Failed or released leases do not keep a node warm.
  std::string job = env.Submit(dev);
  REQUIRE(env.ClaimedJob(nodes[0]) == job);
  REQUIRE(env.Post("/v1/jobs/" + job + "/release", nodes[0].token, {{"epoch", 1}}).status == 200);
  t = Tick(env);
  CHECK(t["autoscaler"]["warm"] == 0);
  CHECK(t["autoscaler"]["target"] == 1);  // the released job is pending again
}

TEST_CASE("tick records the provider's count, or the nodes seen without one",
          "[autoscaler][maintenance]") {
  TestEnv env;
  std::string dev = env.Developer();
  env.Submit(dev);
  NodeRef a = env.Node("a");
  env.ClaimedJob(a);
  core::PoolObservation salad;
  salad.provider = "salad";
  salad.current = 7;
  Json t = Tick(env, salad);
  CHECK(t["autoscaler"]["current"] == 7);
  CHECK(t["autoscaler"]["provider"] == "salad");
  t = Tick(env);  // unknown: active nodes seen within stall_after (a claimed just now)
  CHECK(t["autoscaler"]["current"] == 1);
  CHECK(t["autoscaler"]["provider"].is_null());
  Rows ev = env.Query("SELECT current, provider, target, note FROM scaling_events ORDER BY id");
  REQUIRE(ev.rows.size() == 2);
  CHECK(ev.Get(0, "current").AsInt() == 7);
  CHECK(ev.Get(0, "provider").AsText() == "salad");
  CHECK(ev.Get(0, "note").AsText() == "demand");
  CHECK(ev.Get(1, "provider").is_null());
}

TEST_CASE("tick lists quarantined machines for reallocation within the window",
          "[autoscaler][maintenance]") {
  auto config = TestConfig();
  config.quarantine_window_s = 1000;
  TestEnv env(config);
  NodeRef bad = env.Node("salad-machine-bad");
  env.Node("salad-machine-good");
  CHECK(Tick(env)["reallocate"].empty());
  REQUIRE(env.Post("/v1/nodes/" + bad.id + "/quarantine", env.operator_token).status == 200);
  Json t = Tick(env);
  REQUIRE(t["reallocate"].size() == 1);
  CHECK(t["reallocate"][0]["machine_id"] == "salad-machine-bad");
  CHECK(t["reallocate"][0]["node_id"] == bad.id);
  env.Advance(1001);
  CHECK(Tick(env)["reallocate"].empty());
}
