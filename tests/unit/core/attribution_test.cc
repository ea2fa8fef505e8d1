// Failure attribution (attribution.h): an input error is confirmed by a node of another machine
// and never counts toward bans or quarantine; a report another machine does not reproduce
// quarantines its reporter; node faults keep their rules, and bans on jobs that failed for
// everyone do not count toward quarantine.
#include "tests/unit/core/test_env.h"

namespace gleaner::testing {
namespace {

Resp Fail(TestEnv& env, const NodeRef& node, const std::string& job, int64_t epoch,
          const std::string& reason, const char* cause, int64_t step = -1) {
  Json body = {{"epoch", epoch}, {"reason", reason}};
  if (cause != nullptr) body["cause"] = cause;
  if (step >= 0) body["step"] = step;
  return env.Post("/v1/jobs/" + job + "/fail", node.token, body);
}

int64_t Bans(TestEnv& env) {
  return env.Scalar("SELECT count(*) FROM job_bans");
}
int64_t Quarantined(TestEnv& env) {
  return env.Scalar("SELECT count(*) FROM nodes WHERE state = 'quarantined'");
}
int64_t JobsFailed(TestEnv& env) {
  return env.Scalar("SELECT SUM(jobs_failed) FROM nodes");
}

CoreConfig StrictQuarantine() {
  CoreConfig c = TestConfig();
  c.quarantine_failures = 1;  // a single counted failure quarantines
  return c;
}

}  // namespace

TEST_CASE("input error: pending awaiting another machine, no ban, no count, no quarantine",
          "[attribution]") {
  TestEnv env(StrictQuarantine());
  std::string dev = env.Developer();
  std::string job = env.Submit(dev, 100, 0, {{"max_failures", 1}});
  NodeRef a = env.Node("machine-a"), b = env.Node("machine-b");
  REQUIRE(env.ClaimedJob(a) == job);
  Resp f = Fail(env, a, job, 1, "trainer exited with code 2: dataset: photo 3 is not a JPEG",
                "input", 0);
  INFO(f.body);
  REQUIRE(f.status == 200);
  CHECK(f.json["state"] == "pending");
  CHECK(f.json["cause"] == "input");
  CHECK(f.json["node_quarantined"] == false);
  CHECK(f.json["failures"] == 0);
  CHECK(Bans(env) == 0);
  CHECK(JobsFailed(env) == 0);
  CHECK(Quarantined(env) == 0);
  Resp view = env.Get("/v1/jobs/" + job, dev);
  CHECK(view.json["state"] == "pending");
  REQUIRE(view.json["input_error"].is_object());
  CHECK(view.json["input_error"]["state"] == "awaiting_confirmation");
  CHECK(view.json["input_error"]["reason"] ==
        "trainer exited with code 2: dataset: photo 3 is not a JPEG");
  // The reporter's machine never confirms its own report.
  CHECK(env.Claim(a).status == 204);
  Resp claim = env.Claim(b);
  REQUIRE(claim.status == 200);
  CHECK(claim.json["job"]["id"] == job);
  CHECK(claim.json["lease"]["epoch"] == 2);
  // Still awaiting while the other machine runs it; a canceled job shows none.
  CHECK(env.Get("/v1/jobs/" + job, dev).json["input_error"].is_object());
  REQUIRE(env.Post("/v1/jobs/" + job + "/cancel", dev).status == 200);
  CHECK(env.Get("/v1/jobs/" + job, dev).json["input_error"].is_null());
}

TEST_CASE("input error confirmed by another machine: failed with the trainer's message",
          "[attribution]") {
  TestEnv env(StrictQuarantine());
  std::string dev = env.Developer();
  std::string job = env.Submit(dev, 100, 0, {{"max_failures", 100}});
  NodeRef a = env.Node("machine-a"), b = env.Node("machine-b"), c = env.Node("machine-c");
  REQUIRE(env.ClaimedJob(a) == job);
  REQUIRE(Fail(env, a, job, 1, "fail_at_step 1 reached", "input", 1).status == 200);
  REQUIRE(env.ClaimedJob(b) == job);
  Resp f = Fail(env, b, job, 2, "trainer exited with code 2: fail_at_step 1 reached", "input", 1);
  INFO(f.body);
  REQUIRE(f.status == 200);
  CHECK(f.json["state"] == "failed");
  CHECK(f.json["failures"] == 0);
  CHECK(Bans(env) == 0);
  CHECK(JobsFailed(env) == 0);
  CHECK(Quarantined(env) == 0);
  CHECK(env.Claim(c).status == 204);
  Resp view = env.Get("/v1/jobs/" + job, dev);
  CHECK(view.json["state"] == "failed");
  CHECK(view.json["reason"] == "trainer exited with code 2: fail_at_step 1 reached");
  CHECK(view.json["input_error"].is_null());
  CHECK(view.json["finished_at"].is_string());
  Resp events = env.Get("/v1/jobs/" + job + "/events", dev);
  REQUIRE(events.status == 200);
  CHECK(events.json["failures"].empty());
  REQUIRE(events.json["input_errors"].size() == 2);
  CHECK(events.json["input_errors"][0]["node_id"] == a.id);
  CHECK(events.json["input_errors"][0]["outcome"] == "confirmed");
  CHECK(events.json["input_errors"][1]["node_id"] == b.id);
  CHECK(events.json["input_errors"][1]["outcome"] == "confirmed");
  REQUIRE(events.json["segments"].size() == 2);
  CHECK(events.json["segments"][0]["end_reason"] == "input_error");
  CHECK(events.json["segments"][1]["end_reason"] == "input_error");
  // Both nodes keep working: a normal job goes to either.
  std::string next = env.Submit(dev);
  CHECK(env.ClaimedJob(a) == next);
}

TEST_CASE("input error not reproduced: the reporter is quarantined, the job goes on",
          "[attribution]") {
  SECTION("a checkpoint past the reported step") {
    TestEnv env;
    std::string dev = env.Developer();
    std::string job = env.Submit(dev);
    NodeRef a = env.Node("machine-a"), b = env.Node("machine-b");
    REQUIRE(env.ClaimedJob(a) == job);
    REQUIRE(env.Checkpoint(a, job, 1, 10).status == 200);
    REQUIRE(Fail(env, a, job, 1, "not a JPEG", "input", 15).status == 200);
    REQUIRE(env.ClaimedJob(b) == job);
    // Up to the reported step it proves nothing.
    REQUIRE(env.Checkpoint(b, job, 2, 20 - 5).status == 200);
    CHECK(Quarantined(env) == 0);
    REQUIRE(env.Checkpoint(b, job, 2, 20).status == 200);
    CHECK(env.Query("SELECT state, state_reason FROM nodes WHERE id = ?", {a.id})
              .rows[0][0]
              .AsText() == "quarantined");
    std::string why =
        env.Query("SELECT state_reason FROM nodes WHERE id = ?", {a.id}).rows[0][0].AsText();
    CHECK(why.find("input_error_not_reproduced") == 0);
    CHECK(env.Scalar("SELECT count(*) FROM nodes WHERE id = ? AND state = 'active'", {b.id}) == 1);
    CHECK(env.JobState(job) == "running");
    Resp events = env.Get("/v1/jobs/" + job + "/events", dev);
    REQUIRE(events.json["input_errors"].size() == 1);
    CHECK(events.json["input_errors"][0]["outcome"] == "not_reproduced");
    CHECK(env.Get("/v1/jobs/" + job, dev).json["input_error"].is_null());
    CHECK(env.Complete(b, job, 2).status == 200);
  }
  SECTION("a completion") {
    TestEnv env;
    std::string dev = env.Developer();
    std::string job = env.Submit(dev);
    NodeRef a = env.Node("machine-a"), b = env.Node("machine-b");
    REQUIRE(env.ClaimedJob(a) == job);
    REQUIRE(Fail(env, a, job, 1, "bad params", "input", 100).status == 200);
    REQUIRE(env.ClaimedJob(b) == job);
    REQUIRE(env.Complete(b, job, 2).status == 200);
    CHECK(env.Scalar("SELECT count(*) FROM nodes WHERE id = ? AND state = 'quarantined'", {a.id}) ==
          1);
    CHECK(env.JobState(job) == "completed");
  }
}

TEST_CASE("input error then a node fault from the confirmer: node rules, still awaiting",
          "[attribution]") {
  TestEnv env;
  std::string dev = env.Developer();
  std::string job = env.Submit(dev, 100, 0, {{"max_failures", 3}});
  NodeRef a = env.Node("machine-a"), b = env.Node("machine-b"), c = env.Node("machine-c");
  REQUIRE(env.ClaimedJob(a) == job);
  REQUIRE(Fail(env, a, job, 1, "bad dataset", "input").status == 200);
  REQUIRE(env.ClaimedJob(b) == job);
  Resp f = Fail(env, b, job, 2, "trainer killed by signal 9", "node");
  REQUIRE(f.status == 200);
  CHECK(f.json["state"] == "pending");
  CHECK(f.json["failures"] == 1);
  CHECK(env.Scalar("SELECT count(*) FROM job_bans WHERE node_id = ?", {b.id}) == 1);
  CHECK(env.Scalar("SELECT jobs_failed FROM nodes WHERE id = ?", {b.id}) == 1);
  // Still awaiting a confirmer: not the reporter's machine, not the banned node.
  CHECK(env.Claim(a).status == 204);
  CHECK(env.Claim(b).status == 204);
  REQUIRE(env.ClaimedJob(c) == job);
  Resp g = Fail(env, c, job, 3, "bad dataset (confirmed)", "input");
  REQUIRE(g.status == 200);
  CHECK(g.json["state"] == "failed");
  CHECK(env.Scalar("SELECT count(*) FROM job_bans") == 1);
}

TEST_CASE("fail: node faults keep their rules, and an absent cause is a node fault", "[attribution]") {
  TestEnv env(StrictQuarantine());
  std::string dev = env.Developer();
  std::string job = env.Submit(dev, 100, 0, {{"max_failures", 5}});
  NodeRef a = env.Node("machine-a");
  REQUIRE(env.ClaimedJob(a) == job);
  Resp f = Fail(env, a, job, 1, "segfault", nullptr);
  REQUIRE(f.status == 200);
  CHECK(f.json["cause"] == "node");
  CHECK(f.json["failures"] == 1);
  CHECK(f.json["node_quarantined"] == true);
  CHECK(Bans(env) == 1);
  CHECK(JobsFailed(env) == 1);
  // A cause that is neither is refused.
  NodeRef b = env.Node("machine-b");
  REQUIRE(env.ClaimedJob(b) == job);
  Resp bad = Fail(env, b, job, 2, "x", "developer");
  CHECK(bad.status == 400);
  CHECK(bad.body.find("cause") != std::string::npos);
}

TEST_CASE("quarantine counts ignore bans on jobs that failed for everyone", "[attribution]") {
  auto config = TestConfig();
  config.quarantine_failures = 2;
  TestEnv env(config);
  std::string dev = env.Developer();
  // Two jobs that no node can run (node-cause failures, max_failures 2): each fails on a and b.
  NodeRef a = env.Node("machine-a"), b = env.Node("machine-b");
  for (int i = 0; i < 2; ++i) {
    std::string job = env.Submit(dev, 100, 0, {{"max_failures", 2}});
    REQUIRE(env.ClaimedJob(a) == job);
    REQUIRE(Fail(env, a, job, 1, "crash", "node").status == 200);
    REQUIRE(env.ClaimedJob(b) == job);
    Resp last = Fail(env, b, job, 2, "crash", "node");
    REQUIRE(last.status == 200);
    CHECK(last.json["state"] == "failed");
    CHECK(last.json["node_quarantined"] == false);
  }
  CHECK(Quarantined(env) == 0);
  // Maintenance counts the same way.
  core::Plan tick = core::Drive(env.coord.MaintenancePlan(env.now_ms), *env.db);
  REQUIRE(tick.response().status == 200);
  CHECK(Quarantined(env) == 0);
  // Failures on jobs that completed elsewhere (or are still open) count.
  for (int i = 0; i < 2; ++i) {
    std::string job = env.Submit(dev, 100, 0, {{"max_failures", 3}});
    REQUIRE(env.ClaimedJob(a) == job);
    Resp f = Fail(env, a, job, 1, "crash", "node");
    REQUIRE(f.status == 200);
    CHECK(f.json["node_quarantined"] == (i == 1));
  }
  CHECK(env.Scalar("SELECT count(*) FROM nodes WHERE id = ? AND state = 'quarantined'", {a.id}) ==
        1);
}

}  // namespace gleaner::testing
