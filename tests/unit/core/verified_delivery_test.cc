// Verified training that delivers no forged result (docs/architecture.md "Verified training"):
// the last segment of every verified job is replayed before the job completes ('verifying' in
// between); a node quarantined by a verdict taints all its work (coordinator/core/taint.h);
// a replay that no node of the trainer's device can take ends unverifiable.
#include "tests/unit/core/test_env.h"

using namespace gleaner;
using namespace gleaner::testing;

namespace {

constexpr int64_t kSteps = 100;
// Small enough that no commit but the last one's is drawn with the test's entropies.
constexpr double kFraction = 0.001;

Json Outputs(const std::string& bytes) {
  return Json::array(
      {{{"name", "chain.txt"}, {"sha256", Sha256Hex(bytes)}, {"size", bytes.size()}}});
}

struct Fleet {
  TestEnv env;
  std::string dev = env.Developer();

  std::string Submit() { return env.Submit(dev, kSteps, 0, {{"verify_fraction", kFraction}}); }

  // Uploads and commits the checkpoint `bytes` of `step`; the last step's carries `outputs`.
  Resp Commit(const NodeRef& node, const std::string& job, int64_t epoch, int64_t step,
              const std::string& bytes, const Json& outputs = nullptr) {
    Resp url = env.Post("/v1/jobs/" + job + "/checkpoints", node.token,
                        {{"epoch", epoch}, {"step", step}});
    if (url.status != 200) return url;
    env.StoreBlob(url.json["key"].get<std::string>(), bytes);
    Json body = {{"epoch", epoch}, {"sha256", Sha256Hex(bytes)}, {"size", bytes.size()}};
    if (!outputs.is_null()) body["outputs"] = outputs;
    return env.Post("/v1/jobs/" + job + "/checkpoints/" + std::to_string(step) + "/commit",
                    node.token, body);
  }
  // Trains the whole job (or from its resume) as `node`: commits the last checkpoint with the
  // output `out` and completes. Returns the completion.
  Resp Finish(const NodeRef& node, const std::string& job, int64_t epoch, const std::string& ckpt,
              const std::string& out) {
    Resp c = Commit(node, job, epoch, kSteps, ckpt, Outputs(out));
    REQUIRE(c.status == 200);
    Resp url = env.Post("/v1/jobs/" + job + "/outputs", node.token,
                        {{"epoch", epoch}, {"name", "chain.txt"}});
    REQUIRE(url.status == 200);
    env.StoreBlob(url.json["key"].get<std::string>(), out);
    return env.Post("/v1/jobs/" + job + "/complete", node.token,
                    {{"epoch", epoch}, {"outputs", Outputs(out)}});
  }
  // `node` claims the open replay and commits `ckpt` (with `out` for the last segment).
  Resp Replay(const NodeRef& node, const std::string& ckpt, const std::string& out) {
    Resp c = env.Post("/v1/work", node.token, {{"verify", true}});
    INFO(c.body);
    REQUIRE(c.status == 200);
    REQUIRE(c.json.contains("verification"));
    const std::string path = "/v1/verifications/" + c.json["verification"]["id"].get<std::string>();
    const int64_t epoch = c.json["lease"]["epoch"];
    Resp url = env.Post(path + "/checkpoint", node.token, {{"epoch", epoch}});
    REQUIRE(url.status == 200);
    env.StoreBlob(url.json["key"].get<std::string>(), ckpt);
    Json body = {{"epoch", epoch}, {"sha256", Sha256Hex(ckpt)}, {"size", ckpt.size()}};
    if (c.json["verification"]["stop_step"] == kSteps) body["outputs"] = Outputs(out);
    return env.Post(path + "/commit", node.token, body);
  }
  Json Events(const std::string& job) {
    Resp r = env.Get("/v1/jobs/" + job + "/events", dev);
    REQUIRE(r.status == 200);
    return r.json;
  }
};

}  // namespace

TEST_CASE("verified delivery: the job is verifying until the replay of its last segment agrees",
          "[verify]") {
  Fleet f;
  const std::string job = f.Submit();
  NodeRef trainer = f.env.Node("trainer"), verifier = f.env.Node("verifier");
  REQUIRE(f.env.ClaimedJob(trainer) == job);
  Resp done = f.Finish(trainer, job, 1, "ckpt-100", "out");
  REQUIRE(done.status == 200);
  CHECK(done.json["state"] == "verifying");
  Json j = f.env.Get("/v1/jobs/" + job, f.dev).json;
  CHECK(j["state"] == "verifying");
  CHECK(j["outputs"].empty());
  CHECK(j["finished_at"].is_null());
  CHECK(j["verification"]["open"] == 1);
  CHECK(f.env.Get("/v1/jobs/" + job + "/result", f.dev).status == 409);
  Json listed = f.env.Get("/v1/jobs?state=verifying", f.dev).json;
  REQUIRE(listed["jobs"].size() == 1);
  CHECK(listed["jobs"][0]["id"] == job);
  // A retried completion answers the same.
  CHECK(f.env
            .Post("/v1/jobs/" + job + "/complete", trainer.token,
                  {{"epoch", 1}, {"outputs", Outputs("out")}})
            .json["state"] == "verifying");
  // The replay agrees: the outputs are released.
  REQUIRE(f.Replay(verifier, "ckpt-100", "out").status == 200);
  j = f.env.Get("/v1/jobs/" + job, f.dev).json;
  CHECK(j["state"] == "completed");
  CHECK(j["outputs"].size() == 1);
  CHECK(!j["finished_at"].is_null());
  CHECK(j["verification"]["verified"] == 1);
  CHECK(f.env.Get("/v1/jobs/" + job + "/result", f.dev).status == 200);
  CHECK(f.env.Get("/v1/reports/cost", f.env.operator_token)
            .json["totals"]["verifications"]["verified"] == 1);
}

TEST_CASE("verified delivery: without verification a job completes at once", "[verify]") {
  Fleet f;
  const std::string job = f.env.Submit(f.dev, kSteps);
  NodeRef trainer = f.env.Node("trainer");
  REQUIRE(f.env.ClaimedJob(trainer) == job);
  CHECK(f.Finish(trainer, job, 1, "ckpt-100", "out").json["state"] == "completed");
  CHECK(f.env.Scalar("SELECT count(*) FROM verifications") == 0);
}

TEST_CASE("verified delivery: a forged output never leaves 'verifying', two replays rewind it",
          "[verify]") {
  Fleet f;
  const std::string job = f.Submit();
  NodeRef trainer = f.env.Node("trainer"), a = f.env.Node("a"), b = f.env.Node("b");
  REQUIRE(f.env.ClaimedJob(trainer) == job);
  REQUIRE(f.Finish(trainer, job, 1, "ckpt-100", "forged").json["state"] == "verifying");
  REQUIRE(f.Replay(a, "ckpt-100", "honest").status == 200);
  CHECK(f.env.JobState(job) == "verifying");  // disagree: a round 2 is open
  REQUIRE(f.Replay(b, "ckpt-100", "honest").status == 200);
  Json e = f.Events(job);
  CHECK(e["job"]["state"] == "pending");
  CHECK(e["job"]["outputs"].empty());
  int condemned = 0;
  for (const Json& v : e["verifications"]) condemned += v["verdict"] == "trainer_bad";
  CHECK(condemned == 1);
  CHECK(f.env.Get("/v1/jobs/" + job + "/result", f.dev).status == 409);
}

TEST_CASE("taint: a forger caught once loses every job its work reached", "[verify]") {
  Fleet f;
  NodeRef forger = f.env.Node("forger"), a = f.env.Node("a"), b = f.env.Node("b"),
          c = f.env.Node("c");
  // job1: trained by the forger, its last segment replayed and agreed (it forged nothing
  // there), released.
  const std::string job1 = f.Submit();
  REQUIRE(f.env.ClaimedJob(forger) == job1);
  REQUIRE(f.Finish(forger, job1, 1, "ckpt1-100", "out1").json["state"] == "verifying");
  REQUIRE(f.Replay(a, "ckpt1-100", "out1").status == 200);
  REQUIRE(f.env.JobState(job1) == "completed");
  // job2: the forger trained 0 -> 50 (never drawn), c finished it from there; the replay of
  // the last segment resumes from the forger's checkpoint and agrees.
  const std::string job2 = f.Submit();
  REQUIRE(f.env.ClaimedJob(forger) == job2);
  REQUIRE(f.Commit(forger, job2, 1, 50, "ckpt2-50-forged").status == 200);
  REQUIRE(f.env.Post("/v1/jobs/" + job2 + "/release", forger.token, {{"epoch", 1}}).status == 200);
  REQUIRE(f.env.ClaimedJob(c) == job2);
  REQUIRE(f.Finish(c, job2, 2, "ckpt2-100", "out2").json["state"] == "verifying");
  REQUIRE(f.Replay(a, "ckpt2-100", "out2").status == 200);
  REQUIRE(f.env.JobState(job2) == "completed");
  CHECK(f.env.Get("/v1/jobs/" + job2 + "/result", f.dev).status == 200);
  // job3: the forger is caught by two replays.
  const std::string job3 = f.Submit();
  REQUIRE(f.env.ClaimedJob(forger) == job3);
  REQUIRE(f.Finish(forger, job3, 1, "ckpt3-forged", "out3").json["state"] == "verifying");
  REQUIRE(f.Replay(a, "ckpt3-100", "out3").status == 200);
  REQUIRE(f.Replay(b, "ckpt3-100", "out3").status == 200);
  CHECK(f.env.Scalar("SELECT count(*) FROM nodes WHERE state = 'quarantined'") == 1);
  CHECK(f.env.JobState(job3) == "pending");
  // job1 and job2 are reopened from before the forger's first segment (step 0), naming the
  // outputs they had released.
  for (const auto& [job, out] : {std::pair{job1, "out1"}, std::pair{job2, "out2"}}) {
    Json e = f.Events(job);
    INFO(e.dump());
    CHECK(e["job"]["state"] == "pending");
    CHECK(e["job"]["latest_checkpoint"].is_null());
    CHECK(e["job"]["outputs"].empty());
    CHECK(e["job"]["verification"]["reopened"] == 1);
    CHECK(e["checkpoints"].empty());
    REQUIRE(e["reopened"].size() == 1);
    CHECK(e["reopened"][0]["event"] == "reopened: a node in this job's lineage was found forging");
    CHECK(e["reopened"][0]["node_id"] == forger.id);
    CHECK(e["reopened"][0]["step"] == 0);
    CHECK(e["reopened"][0]["outputs_released"] == Outputs(out));
    // Every lease of the discarded lineage is rework, not the job's training.
    for (const Json& s : e["segments"]) CHECK(s["rework"] == true);
  }
  CHECK(f.env.Get("/v1/jobs/" + job1 + "/result", f.dev).status == 409);
  CHECK(f.env.Get("/metrics", f.env.operator_token).body.find("gleaner_jobs_reopened 2") !=
        std::string::npos);
  // Retrained by honest nodes, the jobs complete again (the forger gets no work).
  CHECK(f.env.Claim(forger).status == 204);
  const std::string next = f.env.ClaimedJob(c);
  CHECK((next == job1 || next == job2 || next == job3));
}

TEST_CASE("taint: a running job the forger trained in is rewound and its lease ended", "[verify]") {
  Fleet f;
  NodeRef forger = f.env.Node("forger"), a = f.env.Node("a"), b = f.env.Node("b"),
          c = f.env.Node("c");
  const std::string job1 = f.Submit();
  REQUIRE(f.env.ClaimedJob(forger) == job1);
  REQUIRE(f.Commit(forger, job1, 1, 10, "ckpt1-10").status == 200);
  REQUIRE(f.Commit(forger, job1, 1, 20, "ckpt1-20-forged").status == 200);
  REQUIRE(f.env.Post("/v1/jobs/" + job1 + "/release", forger.token, {{"epoch", 1}}).status == 200);
  REQUIRE(f.env.ClaimedJob(c) == job1);  // c resumes at 20 and keeps the lease
  REQUIRE(f.Commit(c, job1, 2, 30, "ckpt1-30").status == 200);
  const std::string job2 = f.Submit();
  REQUIRE(f.env.ClaimedJob(forger) == job2);
  REQUIRE(f.Finish(forger, job2, 1, "ckpt2-forged", "out2").json["state"] == "verifying");
  REQUIRE(f.Replay(a, "ckpt2-100", "out2").status == 200);
  REQUIRE(f.Replay(b, "ckpt2-100", "out2").status == 200);
  Json e = f.Events(job1);
  CHECK(e["job"]["state"] == "pending");
  CHECK(e["job"]["latest_checkpoint"].is_null());  // the forger's first segment began at 0
  CHECK(e["reopened"].empty());                    // it was never delivered
  CHECK(f.env.Heartbeat(c, job1, 2, 31).status == 409);
}

TEST_CASE("unverifiable: a replay no node of the trainer's device can take, after the wait",
          "[verify]") {
  Fleet f;
  const std::string job = f.Submit();
  NodeRef trainer = f.env.Node("trainer", 24000, "Lonely GPU");
  f.env.Node("other", 24000, "RTX 4090");
  REQUIRE(f.env.ClaimedJob(trainer) == job);
  REQUIRE(f.Finish(trainer, job, 1, "ckpt-100", "out").json["state"] == "verifying");
  f.env.Advance(599);
  CHECK(f.env.Post("/v1/admin/maintenance", f.env.operator_token)
            .json["verifications_unverifiable"] == 0);
  CHECK(f.env.JobState(job) == "verifying");
  f.env.Advance(2);
  CHECK(f.env.Post("/v1/admin/maintenance", f.env.operator_token)
            .json["verifications_unverifiable"] == 1);
  Json e = f.Events(job);
  CHECK(e["job"]["state"] == "completed");
  CHECK(e["job"]["verification"]["unverifiable"] == 1);
  CHECK(e["job"]["verification"]["verified"] == 0);
  CHECK(e["verifications"][0]["verdict"] == "unverifiable");
  // The cost report counts it under the trainer's GPU, /metrics per device.
  Json report = f.env.Get("/v1/reports/cost?group_by=gpu", f.env.operator_token).json;
  bool counted = false;
  for (const Json& g : report["groups"]) {
    if (g["key"] == "Lonely GPU") counted = g["verifications"]["unverifiable"] == 1;
  }
  CHECK(counted);
  CHECK(report["totals"]["verifications"]["verified"] == 0);
  const std::string metrics = f.env.Get("/metrics", f.env.operator_token).body;
  CHECK(metrics.find("gleaner_verifications{device=\"Lonely GPU\",outcome=\"unverifiable\"} 1") !=
        std::string::npos);
  CHECK(metrics.find("gleaner_jobs{state=\"completed\"} 1") != std::string::npos);
}

TEST_CASE("unverifiable: not while a node of the device could still take the replay", "[verify]") {
  Fleet f;
  const std::string job = f.Submit();
  NodeRef trainer = f.env.Node("trainer", 24000, "Lonely GPU");
  f.env.Node("twin", 24000, "Lonely GPU");
  REQUIRE(f.env.ClaimedJob(trainer) == job);
  REQUIRE(f.Finish(trainer, job, 1, "ckpt-100", "out").json["state"] == "verifying");
  f.env.Advance(601);
  CHECK(f.env.Post("/v1/admin/maintenance", f.env.operator_token)
            .json["verifications_unverifiable"] == 0);
  CHECK(f.env.JobState(job) == "verifying");
}

namespace {

// Registers a node (GPU "RTX 4090") that reports `repro` as its reproducibility class.
NodeRef ClassNode(TestEnv& env, const std::string& machine, const Json& repro) {
  Resp r = env.Post("/v1/nodes/register", env.Key("enroll", machine),
                    {{"machine_id", machine},
                     {"gpu", {{"name", "RTX 4090"}, {"vram_mb", 24000}}},
                     {"agent_version", "0.1.0"},
                     {"repro_class", repro}});
  INFO(r.body);
  REQUIRE(r.status == 200);
  return {r.json["node_id"].get<std::string>(), r.json["token"].get<std::string>()};
}

const Json kClassA = {{"gpu_model", "RTX 4090"}, {"libtorch", "2.6.0+cu124"}, {"driver", "550"}};
const Json kClassB = {{"gpu_model", "RTX 4090"}, {"libtorch", "2.6.0+cu124"}, {"driver", "560"}};

}  // namespace

TEST_CASE("reproducibility class: a replay goes only to a node of the trainer's class",
          "[verify]") {
  Fleet f;
  const std::string job = f.Submit();
  NodeRef trainer = ClassNode(f.env, "trainer", kClassA);
  NodeRef other = ClassNode(f.env, "other-driver", kClassB);
  NodeRef twin = ClassNode(f.env, "twin", kClassA);
  REQUIRE(f.env.ClaimedJob(trainer) == job);
  REQUIRE(f.Finish(trainer, job, 1, "ckpt-100", "out").json["state"] == "verifying");
  // Same GPU model, another driver: not the same class, no replay.
  CHECK(f.env.Post("/v1/work", other.token, {{"verify", true}}).status == 204);
  REQUIRE(f.Replay(twin, "ckpt-100", "out").status == 200);
  Json e = f.Events(job);
  CHECK(e["job"]["state"] == "completed");
  CHECK(e["verifications"][0]["trainer_class"] == kClassA);
  CHECK(e["verifications"][0]["verifier_class"] == kClassA);
  CHECK(e["segments"][0].contains("node_id"));
}

TEST_CASE("reproducibility class: reported with a claim, it moves the node to that class",
          "[verify]") {
  Fleet f;
  const std::string job = f.Submit();
  NodeRef trainer = ClassNode(f.env, "trainer", kClassA);
  NodeRef later = ClassNode(f.env, "later", kClassB);
  // The trainer's claim reports class B (e.g. its driver was updated since registration).
  Resp c = f.env.Post("/v1/work", trainer.token, {{"repro_class", kClassB}});
  REQUIRE(c.status == 200);
  REQUIRE(f.Finish(trainer, job, 1, "ckpt-100", "out").json["state"] == "verifying");
  REQUIRE(f.Replay(later, "ckpt-100", "out").status == 200);
  CHECK(f.Events(job)["verifications"][0]["trainer_class"] == kClassB);
  // Malformed classes are refused with the field named.
  Resp bad = f.env.Post("/v1/work", later.token, {{"repro_class", {{"colour", "red"}}}});
  CHECK(bad.status == 400);
  CHECK(bad.body.find("repro_class.colour") != std::string::npos);
  CHECK(f.env.Post("/v1/work", later.token, {{"repro_class", "x"}}).status == 400);
  CHECK(f.env.Post("/v1/work", later.token, {{"repro_class", {{"driver", std::string(200, 'x')}}}})
            .status == 400);
}

TEST_CASE("reproducibility class: alone in its class, a segment ends unverifiable", "[verify]") {
  Fleet f;
  const std::string job = f.Submit();
  NodeRef trainer = ClassNode(f.env, "trainer", kClassA);
  ClassNode(f.env, "other-driver", kClassB);
  REQUIRE(f.env.ClaimedJob(trainer) == job);
  REQUIRE(f.Finish(trainer, job, 1, "ckpt-100", "out").json["state"] == "verifying");
  f.env.Advance(601);
  CHECK(f.env.Post("/v1/admin/maintenance", f.env.operator_token)
            .json["verifications_unverifiable"] == 1);
  CHECK(f.env.JobState(job) == "completed");
}

TEST_CASE("unverifiable: a disputed last segment is never released unjudged", "[verify]") {
  Fleet f;
  const std::string job = f.Submit();
  NodeRef trainer = ClassNode(f.env, "trainer", kClassA);
  NodeRef first = ClassNode(f.env, "first", kClassA);
  REQUIRE(f.env.ClaimedJob(trainer) == job);
  REQUIRE(f.Finish(trainer, job, 1, "ckpt-100", "forged").json["state"] == "verifying");
  REQUIRE(f.Replay(first, "ckpt-100", "honest").status == 200);  // disagree: round 2 opens
  // No third node of the class: round 2 waits (it is never unverifiable), the job too.
  f.env.Advance(601);
  CHECK(f.env.Post("/v1/admin/maintenance", f.env.operator_token)
            .json["verifications_unverifiable"] == 0);
  CHECK(f.env.JobState(job) == "verifying");
  // Voided unclaimed after the grace: still not released.
  f.env.Advance(86400);
  CHECK(f.env.Post("/v1/admin/maintenance", f.env.operator_token).json["verifications_voided"] ==
        1);
  CHECK(f.env.JobState(job) == "verifying");
  CHECK(f.env.Get("/v1/jobs/" + job + "/result", f.dev).status == 409);
}
