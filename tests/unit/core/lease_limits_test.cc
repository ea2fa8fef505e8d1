// One lease per node, the progress watchdog and the limits on node registration (issue 27).
#include "coordinator/core/rate_limit.h"
#include "tests/unit/core/test_env.h"

using namespace gleaner;
using namespace gleaner::testing;

namespace {

Json Registration(const std::string& machine) {
  return {{"machine_id", machine},
          {"gpu", {{"name", "RTX 4090"}, {"vram_mb", 24000}}},
          {"agent_version", "0.1.0"}};
}

std::string EnrollKey(TestEnv& env, Json extra = Json::object(), std::string* id = nullptr) {
  Json body = {{"role", "enroll"}, {"name", "fleet"}};
  for (auto it = extra.begin(); it != extra.end(); ++it) body[it.key()] = it.value();
  Resp r = env.Post("/v1/keys", env.operator_token, body);
  INFO(r.body);
  REQUIRE(r.status == 201);
  if (id) *id = r.json["id"].get<std::string>();
  return r.json["token"].get<std::string>();
}

}  // namespace

TEST_CASE("one lease per node: six claims from one node get one job", "[lease_limits]") {
  TestEnv env;
  std::string dev = env.Developer();
  std::vector<std::string> jobs;
  for (int i = 0; i < 5; ++i) jobs.push_back(env.Submit(dev, 100));
  NodeRef n = env.Node("hoarder");
  Resp first = env.Claim(n);
  REQUIRE(first.status == 200);
  const std::string held = first.json["job"]["id"].get<std::string>();
  for (int i = 0; i < 5; ++i) {
    Resp again = env.Claim(n);
    CHECK(again.status == 204);
    CHECK(again.Header("Gleaner-Lease-Held") == "job " + held);
    CHECK(again.Header("Retry-After") == "5");
  }
  CHECK(env.Scalar("SELECT count(*) FROM jobs WHERE state = 'running'") == 1);
  CHECK(env.Scalar("SELECT count(*) FROM segments") == 1);
  // Another node still gets the next job.
  NodeRef other = env.Node("honest");
  CHECK(env.Claim(other).status == 200);

  // Finishing the lease frees the node: complete, then the next claim works.
  REQUIRE(env.Complete(n, held, 1).status == 200);
  Resp next = env.Claim(n);
  REQUIRE(next.status == 200);
  const std::string second = next.json["job"]["id"].get<std::string>();
  // Releasing frees it too.
  REQUIRE(env.Post("/v1/jobs/" + second + "/release", n.token, {{"epoch", 1}}).status == 200);
  CHECK(env.Claim(n).status == 200);
}

TEST_CASE("one lease per node: an expired lease of its own does not hold the node",
          "[lease_limits]") {
  TestEnv env;
  std::string dev = env.Developer();
  std::string a = env.Submit(dev, 100, 1);
  env.Submit(dev, 100, 0);
  NodeRef n = env.Node("m1");
  REQUIRE(env.ClaimedJob(n) == a);
  CHECK(env.Claim(n).status == 204);
  env.Advance(61);  // past stall_after: the lease expired
  Resp again = env.Claim(n);
  REQUIRE(again.status == 200);
  CHECK(again.json["job"]["id"] == a);  // the stalled job first, taken back by its node
  CHECK(again.json["lease"]["epoch"] == 2);
}

TEST_CASE("one lease per node: a replay lease counts, both ways", "[lease_limits]") {
  TestEnv env;
  std::string dev = env.Developer();
  std::string job = env.Submit(dev, 30, 0, {{"verify_fraction", 1}});
  NodeRef trainer = env.Node("trainer"), verifier = env.Node("verifier"), w = env.Node("w");
  REQUIRE(env.ClaimedJob(trainer) == job);
  REQUIRE(env.Checkpoint(trainer, job, 1, 10).status == 200);
  REQUIRE(env.Scalar("SELECT count(*) FROM verifications WHERE state = 'pending'") == 1);
  // The verifier takes the replay, then asks again with a job queued: nothing more.
  Resp replay = env.Post("/v1/work", verifier.token, {{"verify", true}});
  REQUIRE(replay.status == 200);
  REQUIRE(replay.json.contains("verification"));
  const std::string vid = replay.json["verification"]["id"].get<std::string>();
  std::string job2 = env.Submit(dev, 30);
  Resp more = env.Post("/v1/work", verifier.token, {{"verify", true}});
  CHECK(more.status == 204);
  CHECK(more.Header("Gleaner-Lease-Held") == "verification " + vid);
  CHECK(env.Claim(verifier).status == 204);
  // A node that holds a job takes no replay: w holds job2 when the trainer's next commit opens
  // a replay w could take.
  REQUIRE(env.ClaimedJob(w) == job2);
  REQUIRE(env.Checkpoint(trainer, job, 1, 20).status == 200);
  REQUIRE(env.Scalar("SELECT count(*) FROM verifications WHERE state = 'pending'") == 1);
  Resp held = env.Post("/v1/work", w.token, {{"verify", true}});
  CHECK(held.status == 204);
  CHECK(held.Header("Gleaner-Lease-Held") == "job " + job2);
  CHECK(env.Scalar("SELECT count(*) FROM verifications WHERE state = 'running'") == 1);
  // Done with job2, w takes the replay.
  REQUIRE(env.Complete(w, job2, 1).status == 200);
  Resp second = env.Post("/v1/work", w.token, {{"verify", true}});
  REQUIRE(second.status == 200);
  CHECK(second.json.contains("verification"));
}

TEST_CASE("progress watchdog: a lease stuck at step 0 ends after the window, unbilled beyond",
          "[lease_limits]") {
  CoreConfig config = TestConfig();
  config.progress_timeout_s = 300;
  TestEnv env(config);
  std::string dev = env.Developer();
  std::string job = env.Submit(dev, 100);
  NodeRef n = env.Node("stuck"), other = env.Node("other");
  REQUIRE(env.ClaimedJob(n) == job);
  const int64_t started = env.now_ms;
  // Heartbeats every 30 s at step 0: the first ten (up to 300 s) renew the lease.
  for (int i = 1; i <= 10; ++i) {
    env.Advance(30);
    Resp hb = env.Heartbeat(n, job, 1, 0);
    INFO(i << " " << hb.body);
    REQUIRE(hb.status == 200);
  }
  env.Advance(30);  // 330 s after the claim, 330 s without progress
  Resp late = env.Heartbeat(n, job, 1, 0);
  CHECK(late.status == 409);
  CHECK(late.ErrorCode() == "no_progress");
  // The job is back in the queue, the node banned from it and its lease over.
  CHECK(env.JobState(job) == "pending");
  CHECK(env.Scalar("SELECT failures FROM jobs WHERE id = ?", {job}) == 1);
  CHECK(env.Scalar("SELECT count(*) FROM job_bans WHERE job_id = ? AND node_id = ?", {job, n.id}) ==
        1);
  Rows seg =
      env.Query("SELECT heartbeats, ended_at, end_reason FROM segments WHERE job_id = ?", {job});
  REQUIRE(seg.rows.size() == 1);
  CHECK(seg.Get(0, "end_reason").AsText() == "no_progress");
  CHECK(seg.Get(0, "heartbeats").AsInt() == 10);
  CHECK(seg.Get(0, "ended_at").AsInt() == started + 300000);
  CHECK(env.Heartbeat(n, job, 1, 0).status == 409);
  CHECK(env.Claim(n).status == 204);  // banned from that job
  // The cost report bills the window (10 heartbeats x 30 s), not the 330 s the node was there.
  Resp cost = env.Get("/v1/reports/cost?group_by=job", env.operator_token);
  REQUIRE(cost.status == 200);
  INFO(cost.body);
  CHECK(cost.json["totals"]["billable_seconds"].get<double>() == Approx(300));
  // Another node takes it.
  CHECK(env.ClaimedJob(other) == job);
}

TEST_CASE("progress watchdog: advancing steps keep the lease and 0 turns it off", "[lease_limits]") {
  CoreConfig config = TestConfig();
  config.progress_timeout_s = 100;
  TestEnv env(config);
  std::string dev = env.Developer();
  std::string job = env.Submit(dev, 1000);
  NodeRef n = env.Node("m1");
  REQUIRE(env.ClaimedJob(n) == job);
  // Slow but steady: one step every 90 s, with heartbeats in between that repeat it.
  for (int step = 1; step <= 5; ++step) {
    env.Advance(45);
    REQUIRE(env.Heartbeat(n, job, 1, step - 1).status == 200);
    env.Advance(45);
    REQUIRE(env.Heartbeat(n, job, 1, step).status == 200);
  }
  // A checkpoint commit counts as progress too (it moves the lease's step without a heartbeat).
  env.Advance(50);
  REQUIRE(env.Heartbeat(n, job, 1, 5).status == 200);
  env.Advance(40);
  REQUIRE(env.Checkpoint(n, job, 1, 10).status == 200);
  env.Advance(20);
  CHECK(env.Heartbeat(n, job, 1, 10).status == 200);  // 110 s after step 5, 20 s after step 10
  env.Advance(50);
  CHECK(env.Heartbeat(n, job, 1, 10).status == 200);
  env.Advance(50);
  CHECK(env.Heartbeat(n, job, 1, 10).ErrorCode() == "no_progress");

  CoreConfig off = TestConfig();
  off.progress_timeout_s = 0;
  TestEnv env2(off);
  std::string dev2 = env2.Developer();
  std::string job2 = env2.Submit(dev2, 100);
  NodeRef m = env2.Node("m2");
  REQUIRE(env2.ClaimedJob(m) == job2);
  for (int i = 0; i < 100; ++i) {
    env2.Advance(30);
    REQUIRE(env2.Heartbeat(m, job2, 1, 0).status == 200);
  }
}

TEST_CASE("registration: an enroll key's node cap, raised by an operator", "[lease_limits]") {
  CoreConfig config = TestConfig();
  config.enroll_max_nodes = 3;
  TestEnv env(config);
  std::string key_id;
  std::string enroll = EnrollKey(env, Json::object(), &key_id);
  std::string node_token;
  std::string secret;
  for (int i = 0; i < 3; ++i) {
    Resp r = env.Post("/v1/nodes/register", enroll, Registration("m" + std::to_string(i)));
    REQUIRE(r.status == 200);
    if (i == 0) secret = r.json["node_secret"].get<std::string>();
  }
  Resp over = env.Post("/v1/nodes/register", enroll, Registration("m3"));
  CHECK(over.status == 403);
  CHECK(over.ErrorCode() == "node_limit");
  CHECK(over.json["error"]["message"].get<std::string>().find("max_nodes") != std::string::npos);
  CHECK(env.Scalar("SELECT count(*) FROM nodes") == 3);
  // A known machine registering again adds no identity: allowed at the cap.
  Json again = Registration("m0");
  again["node_secret"] = secret;
  CHECK(env.Post("/v1/nodes/register", enroll, again).status == 200);
  // Another enroll key keeps working.
  std::string other = EnrollKey(env);
  CHECK(env.Post("/v1/nodes/register", other, Registration("x0")).status == 200);
  // The operator raises the cap; a revoked node no longer counts either.
  Resp raised = env.Raw("PATCH", "/v1/keys/" + key_id, env.operator_token, R"({"max_nodes": 4})");
  INFO(raised.body);
  REQUIRE(raised.status == 200);
  CHECK(raised.json["max_nodes"] == 4);
  CHECK(env.Post("/v1/nodes/register", enroll, Registration("m3")).status == 200);
  CHECK(env.Post("/v1/nodes/register", enroll, Registration("m4")).status == 403);
  std::string m1 = env.Query("SELECT id FROM nodes WHERE machine_id = 'm1'").Get(0, "id").AsText();
  REQUIRE(env.Post("/v1/nodes/" + m1 + "/revoke", env.operator_token).status == 200);
  CHECK(env.Post("/v1/nodes/register", enroll, Registration("m4")).status == 200);
  // 0: no limit; a key's own cap at creation; bad values and non-enroll keys refused.
  REQUIRE(
      env.Raw("PATCH", "/v1/keys/" + key_id, env.operator_token, R"({"max_nodes": 0})").status ==
      200);
  CHECK(env.Post("/v1/nodes/register", enroll, Registration("m5")).status == 200);
  std::string one = EnrollKey(env, {{"max_nodes", 1}});
  CHECK(env.Post("/v1/nodes/register", one, Registration("o0")).status == 200);
  CHECK(env.Post("/v1/nodes/register", one, Registration("o1")).status == 403);
  CHECK(env.Raw("PATCH", "/v1/keys/" + key_id, env.operator_token, R"({"max_nodes": -1})").status ==
        400);
  CHECK(
      env.Raw("PATCH", "/v1/keys/" + key_id, env.operator_token, R"({"max_nodes": "9"})").status ==
      400);
  CHECK(env.Raw("PATCH", "/v1/keys/k_nope", env.operator_token, R"({"max_nodes": 9})").status ==
        404);
  CHECK(env.Post("/v1/keys", env.operator_token,
                 {{"role", "developer"}, {"name", "d"}, {"max_nodes", 5}})
            .status == 400);
  // Operators register without a cap.
  for (int i = 0; i < 5; ++i) {
    CHECK(env.Post("/v1/nodes/register", env.operator_token, Registration("op" + std::to_string(i)))
              .status == 200);
  }
}

TEST_CASE("registration: limited per client address as well as per key", "[lease_limits]") {
  CoreConfig config = TestConfig();
  config.enroll_rate = {1, 5};
  config.enroll_address_rate = {1, 3};
  core::BucketTable buckets;
  TestEnv env(config, &buckets);
  std::string a = EnrollKey(env), b = EnrollKey(env);
  auto reg = [&](const std::string& key, const std::string& machine, const std::string& addr) {
    core::HttpRequest req;
    req.method = "POST";
    req.path = "/v1/nodes/register";
    req.headers = {{"authorization", "Bearer " + key}};
    req.body = DumpJson(Registration(machine));
    req.now_ms = env.now_ms;
    req.entropy = env.NextEntropy();
    req.client_addr = addr;
    core::Plan p = env.coord.Handle(req);
    while (!p.done()) p = p.Continue(env.db->Execute(p.batch()));
    return p.response().status;
  };
  // One address: three registrations, whichever key, then 429.
  CHECK(reg(a, "a1", "198.51.100.7") == 200);
  CHECK(reg(b, "b1", "198.51.100.7") == 200);
  CHECK(reg(a, "a2", "198.51.100.7") == 200);
  CHECK(reg(b, "b2", "198.51.100.7") == 429);
  // Other addresses keep registering with the same keys, until key a's own bucket is empty.
  CHECK(reg(a, "a3", "203.0.113.1") == 200);
  CHECK(reg(a, "a4", "203.0.113.2") == 200);
  CHECK(reg(a, "a5", "203.0.113.3") == 200);
  CHECK(reg(a, "a6", "203.0.113.4") == 429);  // key a: 5 in its burst
  CHECK(reg(b, "b3", "203.0.113.4") == 200);  // key b still has tokens
  // An IPv6 /64 is one address.
  std::string c = EnrollKey(env);
  CHECK(reg(c, "v1", "2001:db8:1:2::1") == 200);
  CHECK(reg(c, "v2", "2001:db8:1:2:ffff::9") == 200);
  CHECK(reg(c, "v3", "2001:db8:1:2:0:0:0:5") == 200);
  CHECK(reg(c, "v4", "2001:db8:1:2::77") == 429);
  CHECK(reg(c, "v4", "2001:db8:1:3::77") == 200);  // the next /64
  env.Advance(10);
  CHECK(reg(a, "a6", "198.51.100.7") == 200);  // refilled
}

TEST_CASE("registration: address buckets", "[lease_limits]") {
  using core::AddressBucket;
  CHECK(AddressBucket("198.51.100.7") == "198.51.100.7");
  CHECK(AddressBucket("::ffff:198.51.100.7") == "198.51.100.7");
  CHECK(AddressBucket("2001:db8:1:2::1") == "2001:db8:1:2::/64");
  CHECK(AddressBucket("2001:0db8:0001:0002:aaaa:bbbb:cccc:dddd") == "2001:db8:1:2::/64");
  CHECK(AddressBucket("2001:db8::") == "2001:db8:0:0::/64");
  CHECK(AddressBucket("::1") == "0:0:0:0::/64");
  CHECK(AddressBucket("not:an:address:zz") == "not:an:address:zz");
  CHECK(AddressBucket("1::2::3") == "1::2::3");
}
