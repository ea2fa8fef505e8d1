// Claim order and eligibility of POST /v1/work.
#include "tests/unit/core/test_env.h"

using namespace gleaner;
using namespace gleaner::testing;

TEST_CASE("claim: nothing to do is 204 with Retry-After", "[claim]") {
  TestEnv env;
  NodeRef n = env.Node("m1");
  Resp r = env.Claim(n);
  CHECK(r.status == 204);
  CHECK(r.Header("Retry-After") == "5");
}

TEST_CASE("claim: pending by priority, then age, then id", "[claim]") {
  TestEnv env;
  std::string dev = env.Developer();
  std::string low_old = env.Submit(dev, 100, 0);
  env.Advance(1);
  std::string high_new = env.Submit(dev, 100, 5);
  env.Advance(1);
  std::string low_new = env.Submit(dev, 100, 0);
  NodeRef a = env.Node("a"), b = env.Node("b"), c = env.Node("c"), d = env.Node("d");
  CHECK(env.ClaimedJob(a) == high_new);
  CHECK(env.ClaimedJob(b) == low_old);
  CHECK(env.ClaimedJob(c) == low_new);
  CHECK(env.Claim(d).status == 204);
}

TEST_CASE("claim: the response carries job, lease and no resume on a fresh job", "[claim]") {
  TestEnv env;
  std::string dev = env.Developer();
  std::string job = env.Submit(dev, 50);
  NodeRef n = env.Node("m1");
  Resp r = env.Claim(n);
  REQUIRE(r.status == 200);
  CHECK(r.json["job"]["id"] == job);
  CHECK(r.json["job"]["kind"] == "synthetic");
  CHECK(r.json["job"]["steps"] == 50);
  CHECK(r.json["job"]["params"]["checkpoint_every"] == 10);
  CHECK(r.json["job"]["params"]["seed"] == 0);
  CHECK(r.json["lease"]["epoch"] == 1);
  CHECK(r.json["lease"]["heartbeat_interval"] == 30.0);
  CHECK(r.json["lease"]["expires_at"] == core::FormatTime(env.now_ms + 60000));
  CHECK(r.json["inputs"].is_object());
  CHECK(r.json["inputs"].empty());
  CHECK_FALSE(r.json.contains("resume"));
  CHECK(env.JobState(job) == "running");
  CHECK(env.Scalar("SELECT attempts FROM jobs WHERE id = ?", {job}) == 1);
  // A segment is opened with the node's price snapshot (default '*').
  Rows seg = env.Query("SELECT node_id, epoch, usd_per_hour, gpu_name, ended_at FROM segments");
  REQUIRE(seg.rows.size() == 1);
  CHECK(seg.Get(0, "node_id").AsText() == n.id);
  CHECK(seg.Get(0, "epoch").AsInt() == 1);
  CHECK(seg.Get(0, "usd_per_hour").AsReal() == Approx(0.324));
  CHECK(seg.Get(0, "gpu_name").AsText() == "RTX 4090");
  CHECK(seg.Get(0, "ended_at").is_null());
}

TEST_CASE("claim: stalled running jobs come before pending ones, even of higher priority",
          "[claim]") {
  TestEnv env;
  std::string dev = env.Developer();
  std::string first = env.Submit(dev, 100, 0);
  NodeRef a = env.Node("a"), b = env.Node("b");
  REQUIRE(env.ClaimedJob(a) == first);
  env.Advance(1);
  std::string urgent = env.Submit(dev, 100, 100);
  env.Advance(61);  // a's lease (60 s) expired
  Resp r = env.Claim(b);
  REQUIRE(r.status == 200);
  CHECK(r.json["job"]["id"] == first);
  CHECK(r.json["lease"]["epoch"] == 2);
  // The stalled lease's segment was closed as 'stalled' in the same batch.
  Rows segs = env.Query(
      "SELECT epoch, node_id, end_reason FROM segments WHERE job_id = ? "
      "ORDER BY epoch",
      {first});
  REQUIRE(segs.rows.size() == 2);
  CHECK(segs.Get(0, "end_reason").AsText() == "stalled");
  CHECK(segs.Get(1, "end_reason").is_null());
  CHECK(segs.Get(1, "node_id").AsText() == b.id);
  // The old holder is fenced out.
  CHECK(env.Heartbeat(a, first, 1, 10).status == 409);
  CHECK(env.ClaimedJob(a) == urgent);
}

TEST_CASE("claim: a live lease is never handed out twice", "[claim]") {
  TestEnv env;
  std::string dev = env.Developer();
  std::string job = env.Submit(dev);
  NodeRef a = env.Node("a"), b = env.Node("b");
  env.ClaimedJob(a);
  env.Advance(59);
  CHECK(env.Claim(b).status == 204);
  CHECK(env.Heartbeat(a, job, 1, 5).status == 200);
  env.Advance(59);  // the heartbeat extended the lease
  CHECK(env.Claim(b).status == 204);
}

TEST_CASE("claim: never a job the node failed, never beyond its VRAM", "[claim]") {
  TestEnv env;
  std::string dev = env.Developer();
  std::string big = env.Submit(dev, 100, 10, {{"requirements", {{"min_vram_mb", 40000}}}});
  std::string small = env.Submit(dev, 100, 0);
  NodeRef gpu24 = env.Node("small", 24000), gpu80 = env.Node("big", 81920, "H100");
  CHECK(env.ClaimedJob(gpu24) == small);
  CHECK(env.Post("/v1/jobs/" + small + "/fail", gpu24.token, {{"epoch", 1}, {"reason", "boom"}})
            .status == 200);
  CHECK(env.JobState(small) == "pending");
  CHECK(env.Claim(gpu24).status == 204);  // banned from small, too small for big
  CHECK(env.ClaimedJob(gpu80) == big);
  NodeRef other = env.Node("other", 24000);
  CHECK(env.ClaimedJob(other) == small);
}

TEST_CASE("claim: a quarantined node gets 204 and nothing changes", "[claim]") {
  TestEnv env;
  std::string dev = env.Developer();
  std::string job = env.Submit(dev);
  NodeRef n = env.Node("m1");
  REQUIRE(env.Post("/v1/nodes/" + n.id + "/quarantine", env.operator_token).status == 200);
  std::string before = env.Snapshot();
  Resp r = env.Claim(n);
  CHECK(r.status == 204);
  CHECK(r.Header("Gleaner-Node-State") == "quarantined");
  CHECK(env.Snapshot() == before);
  REQUIRE(env.Post("/v1/nodes/" + n.id + "/restore", env.operator_token).status == 200);
  CHECK(env.ClaimedJob(n) == job);
}

TEST_CASE("claim: each claim increments the epoch - resume is the latest committed checkpoint",
          "[claim]") {
  TestEnv env;
  std::string dev = env.Developer();
  std::string job = env.Submit(dev, 100);
  NodeRef a = env.Node("a"), b = env.Node("b"), c = env.Node("c");
  env.ClaimedJob(a);
  REQUIRE(env.Checkpoint(a, job, 1, 20).status == 200);
  REQUIRE(env.Checkpoint(a, job, 1, 30, "thirty").status == 200);
  REQUIRE(env.Post("/v1/jobs/" + job + "/release", a.token, {{"epoch", 1}}).status == 200);
  Resp r = env.Claim(b);
  REQUIRE(r.status == 200);
  CHECK(r.json["lease"]["epoch"] == 2);
  REQUIRE(r.json.contains("resume"));
  CHECK(r.json["resume"]["step"] == 30);
  CHECK(r.json["resume"]["sha256"] == Sha256Hex("thirty"));
  CHECK(r.json["resume"]["size"] == 6);
  std::string url = r.json["resume"]["url"];
  CHECK(url.find("/blobs/jobs/" + job + "/ckpt/e1/s0000000030?m=GET") != std::string::npos);
  // The new segment starts at the checkpoint.
  CHECK(env.Scalar("SELECT step_start FROM segments WHERE job_id = ? AND epoch = 2", {job}) == 30);
  CHECK(env.Scalar("SELECT step_done FROM jobs WHERE id = ?", {job}) == 30);
  env.Advance(61);
  Resp r3 = env.Claim(c);
  REQUIRE(r3.status == 200);
  CHECK(r3.json["lease"]["epoch"] == 3);
  CHECK(env.Scalar("SELECT attempts FROM jobs WHERE id = ?", {job}) == 3);
}

TEST_CASE("claim: the segment snapshots the GPU's own price when one is set", "[claim]") {
  TestEnv env;
  REQUIRE(
      env.Put("/v1/prices", env.operator_token, {{"gpu", "H100"}, {"usd_per_hour", 2.5}}).status ==
      200);
  std::string dev = env.Developer();
  std::string job = env.Submit(dev);
  NodeRef n = env.Node("h", 81920, "H100");
  env.ClaimedJob(n);
  REQUIRE(
      env.Put("/v1/prices", env.operator_token, {{"gpu", "H100"}, {"usd_per_hour", 9.0}}).status ==
      200);
  CHECK(env.Query("SELECT usd_per_hour FROM segments").rows[0][0].AsReal() == Approx(2.5));
}

namespace {
// Runs a request's plan up to (not including) its second batch, i.e. just after auth.
core::Plan AfterAuth(TestEnv& env, const NodeRef& node) {
  core::HttpRequest req;
  req.method = "POST";
  req.path = "/v1/work";
  req.headers = {{"authorization", "Bearer " + node.token}};
  req.now_ms = env.now_ms;
  req.entropy = env.NextEntropy();
  core::Plan p = env.coord.Handle(req);
  REQUIRE_FALSE(p.done());
  p = p.Continue(env.db->Execute(p.batch()));  // auth batch
  REQUIRE_FALSE(p.done());
  return p;
}
}  // namespace

TEST_CASE("claim: the node's state is checked inside the claim statement itself", "[claim]") {
  TestEnv env;
  std::string dev = env.Developer();
  env.Submit(dev);
  NodeRef n = env.Node("m1");
  core::Plan p = AfterAuth(env, n);  // auth saw an active node
  env.Query("UPDATE nodes SET state = 'quarantined' WHERE id = ?", {n.id});
  core::Plan done = core::Drive(std::move(p), *env.db);
  CHECK(done.response().status == 204);
  CHECK(env.Scalar("SELECT count(*) FROM jobs WHERE state = 'pending'") == 1);
  CHECK(env.Scalar("SELECT count(*) FROM segments") == 0);
}

TEST_CASE("claim: interleaved claimers never share a job", "[claim]") {
  TestEnv env;
  std::string dev = env.Developer();
  std::string j1 = env.Submit(dev), j2 = env.Submit(dev);
  NodeRef a = env.Node("a"), b = env.Node("b"), c = env.Node("c");
  core::Plan pa = AfterAuth(env, a);
  core::Plan pb = AfterAuth(env, b);
  core::Plan pc = AfterAuth(env, c);
  core::Plan rb = core::Drive(std::move(pb), *env.db);
  core::Plan ra = core::Drive(std::move(pa), *env.db);
  core::Plan rc = core::Drive(std::move(pc), *env.db);
  REQUIRE(rb.response().status == 200);
  REQUIRE(ra.response().status == 200);
  CHECK(rc.response().status == 204);
  std::string got_b = ParseJson(rb.response().body).value()["job"]["id"];
  std::string got_a = ParseJson(ra.response().body).value()["job"]["id"];
  CHECK(got_b == j1);
  CHECK(got_a == j2);
  CHECK(env.Scalar("SELECT count(*) FROM segments") == 2);
  CHECK(env.Scalar("SELECT count(DISTINCT job_id) FROM segments") == 2);
}

TEST_CASE("claim: a replay waits for an idle verifying node until it is overdue, then goes first",
          "[claim][verification]") {
  CoreConfig config = TestConfig();
  config.verify_max_wait_s = 600;
  TestEnv env(config);
  std::string dev = env.Developer();
  std::string checked = env.Submit(dev, 100, 0, {{"verify_fraction", 1}});
  NodeRef trainer = env.Node("trainer");
  REQUIRE(env.ClaimedJob(trainer) == checked);
  REQUIRE(env.Checkpoint(trainer, checked, 1, 10).status == 200);  // opens a replay of 0 -> 10
  const std::string queued = env.Submit(dev, 100, 5);
  auto verify_claim = [&](const NodeRef& n) {
    return env.Post("/v1/work", n.token, {{"verify", true}});
  };
  // Not overdue: the queued job goes first, even to a verifying node.
  for (int i = 0; i < 20; ++i) {  // 599 s, the trainer's lease kept alive
    env.Advance(i < 19 ? 30 : 29);
    REQUIRE(env.Heartbeat(trainer, checked, 1, 20).status == 200);
  }
  NodeRef early = env.Node("early");
  Resp a = verify_claim(early);
  REQUIRE(a.status == 200);
  CHECK(a.json["job"]["id"] == queued);
  CHECK_FALSE(a.json.contains("verification"));
  // Overdue (open 600 s): the next verifying node takes it ahead of a queued job of any
  // priority; a node that does not verify still gets the job.
  const std::string later = env.Submit(dev, 100, 9);
  env.Advance(1);
  NodeRef v = env.Node("verifier"), plain = env.Node("plain");
  Resp b = verify_claim(v);
  REQUIRE(b.status == 200);
  REQUIRE(b.json.contains("verification"));
  CHECK(b.json["job"]["id"] == checked);
  CHECK(b.json["verification"]["stop_step"] == 10);
  CHECK(env.ClaimedJob(plain) == later);
  // The trainer of the segment never gets its own replay, overdue or not.
  CHECK(env.Scalar("SELECT count(*) FROM verifications WHERE node_id = ?", {trainer.id}) == 0);
}

TEST_CASE("claim: an overdue replay the node may not take does not hold its jobs back",
          "[claim][verification]") {
  TestEnv env;
  std::string dev = env.Developer();
  std::string checked = env.Submit(dev, 100, 0, {{"verify_fraction", 1}});
  NodeRef trainer = env.Node("trainer");
  REQUIRE(env.ClaimedJob(trainer) == checked);
  REQUIRE(env.Checkpoint(trainer, checked, 1, 10).status == 200);
  REQUIRE(env.Post("/v1/jobs/" + checked + "/release", trainer.token, {{"epoch", 1}}).status ==
          200);
  env.Advance(3600);
  // The overdue replay is of the trainer's own segment: it gets the job back, not a replay.
  Resp r = env.Post("/v1/work", trainer.token, {{"verify", true}});
  REQUIRE(r.status == 200);
  CHECK(r.json["job"]["id"] == checked);
  CHECK_FALSE(r.json.contains("verification"));
}

TEST_CASE("claim: a replay goes only to a node of the device its segment was trained on",
          "[claim][verification]") {
  TestEnv env;
  std::string dev = env.Developer();
  std::string checked = env.Submit(dev, 100, 0, {{"verify_fraction", 1}});
  NodeRef trainer = env.Node("trainer", 24000, "RTX 4090");
  REQUIRE(env.ClaimedJob(trainer) == checked);
  REQUIRE(env.Checkpoint(trainer, checked, 1, 10).status == 200);
  auto verify_claim = [&](const NodeRef& n) {
    return env.Post("/v1/work", n.token, {{"verify", true}});
  };
  // A CPU node and another GPU model cannot reproduce it bit for bit: nothing for them.
  NodeRef cpu = env.Node("cpu-node", 24000, "cpu"), other = env.Node("l4", 24000, "NVIDIA L4");
  CHECK(verify_claim(cpu).status == 204);
  CHECK(verify_claim(other).status == 204);
  NodeRef same = env.Node("same", 24000, "RTX 4090");
  Resp r = verify_claim(same);
  REQUIRE(r.status == 200);
  REQUIRE(r.json.contains("verification"));
  Resp events = env.Get("/v1/jobs/" + checked + "/events", dev);
  CHECK(events.json["verifications"][0]["trainer_gpu"] == "RTX 4090");
}
