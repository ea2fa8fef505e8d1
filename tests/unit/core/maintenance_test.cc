// Maintenance tick: stall reaping, automatic quarantine and restore, autoscaler target.
#include "tests/unit/core/test_env.h"

using namespace gleaner;
using namespace gleaner::testing;

namespace {
Resp Tick(TestEnv& env) {
  core::Plan p = core::Drive(env.coord.MaintenancePlan(env.now_ms), *env.db);
  Resp r;
  r.status = p.response().status;
  r.body = p.response().body;
  auto parsed = ParseJson(r.body);
  if (parsed.ok()) r.json = std::move(parsed).value();
  return r;
}
}  // namespace

TEST_CASE("maintenance closes stalled segments - the job stays running and is claimed first",
          "[maintenance]") {
  TestEnv env;
  std::string dev = env.Developer();
  std::string job = env.Submit(dev);
  std::string other = env.Submit(dev, 100, 50);
  NodeRef a = env.Node("a"), b = env.Node("b");
  REQUIRE(env.ClaimedJob(a) == other);
  REQUIRE(env.ClaimedJob(b) == job);
  env.Advance(30);
  REQUIRE(env.Heartbeat(a, other, 1, 10).status == 200);
  int64_t last_hb = env.now_ms;
  env.Advance(45);  // b's lease (claimed 75 s ago) expired; a's (hb 45 s ago) did not
  Resp t = Tick(env);
  REQUIRE(t.status == 200);
  REQUIRE(t.json["stalled"].size() == 1);
  CHECK(t.json["stalled"][0]["job_id"] == job);
  CHECK(t.json["stalled"][0]["node_id"] == b.id);
  CHECK(env.JobState(job) == "running");
  Resp view = env.Get("/v1/jobs/" + job, dev);
  CHECK(view.json["stalled"] == true);
  Rows seg =
      env.Query("SELECT end_reason, ended_at, started_at FROM segments WHERE job_id = ?", {job});
  CHECK(seg.Get(0, "end_reason").AsText() == "stalled");
  CHECK(seg.Get(0, "ended_at").AsInt() == seg.Get(0, "started_at").AsInt());  // no heartbeat
  // A second tick finds nothing new.
  CHECK(Tick(env).json["stalled"].empty());
  (void)last_hb;
  // Nodes a and b are busy/fenced; a new node picks up the stalled job first.
  std::string pending = env.Submit(dev, 100, 99);
  NodeRef c = env.Node("c");
  REQUIRE(env.ClaimedJob(c) == job);
  CHECK(env.Scalar("SELECT count(*) FROM segments WHERE job_id = ? AND ended_at IS NULL", {job}) ==
        1);
  (void)pending;
}

TEST_CASE("autoscaler target = clamp(running + pending, min, max) recorded in scaling_events",
          "[maintenance]") {
  auto config = TestConfig();
  config.autoscale_min = 1;
  config.autoscale_max = 3;
  TestEnv env(config);
  CHECK(Tick(env).json["autoscaler"]["target"] == 1);  // clamp(0) = min
  std::string dev = env.Developer();
  for (int i = 0; i < 5; ++i) env.Submit(dev);
  NodeRef a = env.Node("a");
  env.ClaimedJob(a);
  Resp t = Tick(env);
  CHECK(t.json["autoscaler"]["running"] == 1);
  CHECK(t.json["autoscaler"]["pending"] == 4);
  CHECK(t.json["autoscaler"]["target"] == 3);
  Rows ev = env.Query(
      "SELECT running, pending, target, min_nodes, max_nodes FROM scaling_events "
      "ORDER BY id");
  REQUIRE(ev.rows.size() == 2);
  CHECK(ev.Get(1, "target").AsInt() == 3);
  CHECK(ev.Get(1, "min_nodes").AsInt() == 1);
  CHECK(ev.Get(1, "max_nodes").AsInt() == 3);
  // The operator route runs the same tick.
  Resp op = env.Post("/v1/admin/maintenance", env.operator_token);
  CHECK(op.status == 200);
  CHECK(op.json["autoscaler"]["target"] == 3);
  CHECK(env.Post("/v1/admin/maintenance", dev).status == 403);
}

TEST_CASE(
    "a node failing quarantine_failures jobs within the window is quarantined - restore "
    "resets",
    "[maintenance]") {
  TestEnv env;  // 3 failures within 3600 s
  std::string dev = env.Developer();
  NodeRef bad = env.Node("bad");
  std::vector<std::string> jobs;
  for (int i = 0; i < 4; ++i) jobs.push_back(env.Submit(dev));
  for (int i = 0; i < 3; ++i) {
    std::string job = env.ClaimedJob(bad);
    Resp f = env.Post("/v1/jobs/" + job + "/fail", bad.token, {{"epoch", 1}, {"reason", "oom"}});
    REQUIRE(f.status == 200);
    CHECK(f.json["node_quarantined"] == (i == 2));
    env.Advance(600);
  }
  CHECK(env.Query("SELECT state FROM nodes WHERE id = ?", {bad.id}).rows[0][0].AsText() ==
        "quarantined");
  CHECK(env.Claim(bad).status == 204);
  Resp nodes = env.Get("/v1/nodes", env.operator_token);
  REQUIRE(nodes.status == 200);
  CHECK(nodes.json["nodes"][0]["state"] == "quarantined");
  CHECK(nodes.json["nodes"][0]["jobs_failed"] == 3);
  // Restore: earlier failures no longer count; the node works again.
  Resp restored = env.Post("/v1/nodes/" + bad.id + "/restore", env.operator_token);
  REQUIRE(restored.status == 200);
  CHECK(restored.json["state"] == "active");
  CHECK(Tick(env).json["quarantined"].empty());
  env.Advance(1);
  std::string job = env.ClaimedJob(bad);
  CHECK(env.Post("/v1/jobs/" + job + "/fail", bad.token, {{"epoch", 1}, {"reason", "oom"}})
            .json["node_quarantined"] == false);
  CHECK(env.Post("/v1/nodes/n_missing/quarantine", env.operator_token).status == 404);
  CHECK(env.Post("/v1/nodes/" + bad.id + "/explode", env.operator_token).status == 404);
}

TEST_CASE("maintenance quarantines nodes whose failures are within the window only",
          "[maintenance]") {
  auto config = TestConfig();
  config.quarantine_failures = 2;
  config.quarantine_window_s = 100;
  TestEnv env(config);
  std::string dev = env.Developer();
  NodeRef n = env.Node("n");
  // Insert bans directly (as if the fail batches had run without the quarantine step).
  env.Query(
      "INSERT INTO job_bans (job_id, node_id, reason, at) VALUES ('j_1', ?, 'x', ?), "
      "('j_2', ?, 'x', ?)",
      {n.id, env.now_ms - 150000, n.id, env.now_ms - 50000});
  CHECK(Tick(env).json["quarantined"].empty());  // one inside the window
  env.Query("INSERT INTO job_bans (job_id, node_id, reason, at) VALUES ('j_3', ?, 'x', ?)",
            {n.id, env.now_ms - 10000});
  Resp t = Tick(env);
  REQUIRE(t.json["quarantined"].size() == 1);
  CHECK(t.json["quarantined"][0] == n.id);
}
