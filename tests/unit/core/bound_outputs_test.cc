// The job's output is bound to its final checkpoint (coordinator/core/outputs.h): the checkpoint
// of the last step is committed with the files it exports to, the job completes only with those,
// and a replay of the last segment compares the outputs it exported as well as the checkpoint.
#include "tests/unit/core/test_env.h"

using namespace gleaner;
using namespace gleaner::testing;

namespace {

constexpr int64_t kSteps = 100;

Json Outputs(const std::string& bytes, const std::string& name = "chain.txt") {
  return Json::array({{{"name", name}, {"sha256", Sha256Hex(bytes)}, {"size", bytes.size()}}});
}

struct Verified {
  TestEnv env;
  std::string dev, job;
  NodeRef trainer;

  explicit Verified(double fraction) {
    dev = env.Developer();
    job = env.Submit(dev, kSteps, 0, {{"verify_fraction", fraction}});
    trainer = env.Node("trainer");
    REQUIRE(env.ClaimedJob(trainer) == job);
  }
  std::string base() const { return "/v1/jobs/" + job; }

  // Uploads and commits the checkpoint of `step` (bytes "ckpt-<step>") with `outputs` (null:
  // none).
  Resp Commit(const NodeRef& node, int64_t epoch, int64_t step, const Json& outputs) {
    Resp url = env.Post(base() + "/checkpoints", node.token, {{"epoch", epoch}, {"step", step}});
    if (url.status != 200) return url;
    const std::string bytes = "ckpt-" + std::to_string(step);
    env.StoreBlob(url.json["key"].get<std::string>(), bytes);
    Json body = {{"epoch", epoch}, {"sha256", Sha256Hex(bytes)}, {"size", bytes.size()}};
    if (!outputs.is_null()) body["outputs"] = outputs;
    return env.Post(base() + "/checkpoints/" + std::to_string(step) + "/commit", node.token, body);
  }

  // Uploads `bytes` as chain.txt and completes with the outputs it declares.
  Resp Complete(const NodeRef& node, int64_t epoch, const std::string& bytes) {
    Resp url = env.Post(base() + "/outputs", node.token, {{"epoch", epoch}, {"name", "chain.txt"}});
    if (url.status != 200) return url;
    env.StoreBlob(url.json["key"].get<std::string>(), bytes);
    return env.Post(base() + "/complete", node.token,
                    {{"epoch", epoch}, {"outputs", Outputs(bytes)}});
  }

  // A verifier claims the open replay: {path, epoch, stop_step}.
  Json ClaimReplay(const NodeRef& node) {
    Resp c = env.Post("/v1/work", node.token, {{"verify", true}});
    REQUIRE(c.status == 200);
    REQUIRE(c.json.contains("verification"));
    return {{"path", "/v1/verifications/" + c.json["verification"]["id"].get<std::string>()},
            {"epoch", c.json["lease"]["epoch"]},
            {"stop_step", c.json["verification"]["stop_step"]}};
  }
  // Uploads the replayed checkpoint `bytes` and commits it with `outputs` (null: none).
  Resp CommitReplay(const NodeRef& node, const Json& claim, const std::string& bytes,
                    const Json& outputs) {
    const std::string path = claim["path"];
    const int64_t epoch = claim["epoch"];
    Resp url = env.Post(path + "/checkpoint", node.token, {{"epoch", epoch}});
    REQUIRE(url.status == 200);
    env.StoreBlob(url.json["key"].get<std::string>(), bytes);
    Json body = {{"epoch", epoch}, {"sha256", Sha256Hex(bytes)}, {"size", bytes.size()}};
    if (!outputs.is_null()) body["outputs"] = outputs;
    return env.Post(path + "/commit", node.token, body);
  }
  Resp Replay(const NodeRef& node, const std::string& bytes, const Json& outputs) {
    return CommitReplay(node, ClaimReplay(node), bytes, outputs);
  }

  Json Events() {
    Resp r = env.Get(base() + "/events", dev);
    REQUIRE(r.status == 200);
    return r.json;
  }
};

}  // namespace

TEST_CASE("bound outputs: the last step's checkpoint carries them, and no other does",
          "[outputs]") {
  Verified v(0);
  const std::string honest = "chain of the job\n";
  // Outputs on an intermediate checkpoint: 400, nothing committed.
  Resp early = v.Commit(v.trainer, 1, 50, Outputs(honest));
  CHECK(early.status == 400);
  CHECK(early.json["error"]["message"] == "outputs come only with the checkpoint of the last step");
  CHECK(v.env.Scalar("SELECT count(*) FROM checkpoints WHERE job_id = ?", {v.job}) == 0);
  REQUIRE(v.Commit(v.trainer, 1, 50, nullptr).status == 200);
  // The last step's checkpoint without outputs: 400.
  Resp bare = v.Commit(v.trainer, 1, kSteps, nullptr);
  CHECK(bare.status == 400);
  CHECK(bare.json["error"]["message"].get<std::string>().find("must carry outputs") !=
        std::string::npos);
  // Malformed outputs: 400 naming the element.
  Json bad = Outputs(honest);
  bad[0]["sha256"] = "ABC";
  Resp malformed = v.Commit(v.trainer, 1, kSteps, bad);
  CHECK(malformed.status == 400);
  CHECK(malformed.json["error"]["message"].get<std::string>().find("outputs[0].sha256") !=
        std::string::npos);
  CHECK(v.env.Scalar("SELECT ckpt_step FROM jobs WHERE id = ?", {v.job}) == 50);
  // Committed with outputs (two files, listed in either order: one canonical form).
  Json two = Outputs(honest);
  two.push_back(Outputs("peft", "a_peft.safetensors")[0]);
  REQUIRE(v.Commit(v.trainer, 1, kSteps, two).status == 200);
  Json reversed = Json::array({two[1], two[0]});
  const std::string bytes = "ckpt-100";
  Resp retried = v.env.Post(
      v.base() + "/checkpoints/100/commit", v.trainer.token,
      {{"epoch", 1}, {"sha256", Sha256Hex(bytes)}, {"size", bytes.size()}, {"outputs", reversed}});
  CHECK(retried.status == 200);  // the same commit again
  // The same checkpoint with other outputs is not that commit: it is stale.
  Resp changed = v.env.Post(v.base() + "/checkpoints/100/commit", v.trainer.token,
                            {{"epoch", 1},
                             {"sha256", Sha256Hex(bytes)},
                             {"size", bytes.size()},
                             {"outputs", Outputs("x")}});
  CHECK(changed.status == 409);
  Json events = v.Events();
  REQUIRE(events["checkpoints"].size() == 2);
  CHECK(events["checkpoints"][0]["outputs"].is_null());
  CHECK(events["checkpoints"][1]["outputs"][0]["name"] == "a_peft.safetensors");
  CHECK(events["checkpoints"][1]["outputs"][1]["sha256"] == Sha256Hex(honest));
}

TEST_CASE("bound outputs: a job completes only with the outputs its final checkpoint names",
          "[outputs]") {
  Verified v(0);
  const std::string honest = "chain of the job\n", forged = "forged chain\n";
  REQUIRE(v.Commit(v.trainer, 1, kSteps, Outputs(honest)).status == 200);
  // Other bytes than the final checkpoint's export: 400, the job still runs.
  Resp other = v.Complete(v.trainer, 1, forged);
  CHECK(other.status == 400);
  CHECK(other.json["error"]["message"].get<std::string>().find(
            "differ from the ones the checkpoint of step 100 was committed with") !=
        std::string::npos);
  CHECK(v.env.JobState(v.job) == "running");
  // A name the checkpoint did not list, even beside the right file: 400.
  Resp url = v.env.Post(v.base() + "/outputs", v.trainer.token, {{"epoch", 1}, {"name", "x.bin"}});
  REQUIRE(url.status == 200);
  v.env.StoreBlob(url.json["key"].get<std::string>(), "x");
  Json extra = Outputs(honest);
  extra.push_back(Outputs("x", "x.bin")[0]);
  v.env.StoreBlob("jobs/" + v.job + "/out/e1/chain.txt", honest);
  Resp more =
      v.env.Post(v.base() + "/complete", v.trainer.token, {{"epoch", 1}, {"outputs", extra}});
  CHECK(more.status == 400);
  CHECK(more.json["error"]["message"].get<std::string>().find("differ") != std::string::npos);
  CHECK(v.env.JobState(v.job) == "running");
  REQUIRE(v.Complete(v.trainer, 1, honest).status == 200);
  CHECK(v.env.JobState(v.job) == "completed");
}

TEST_CASE("bound outputs: another node resumed at the final checkpoint completes with its export",
          "[outputs]") {
  Verified v(0);
  const std::string honest = "chain of the job\n";
  REQUIRE(v.Commit(v.trainer, 1, kSteps, Outputs(honest)).status == 200);
  REQUIRE(v.env.Post(v.base() + "/release", v.trainer.token, {{"epoch", 1}}).status == 200);
  NodeRef next = v.env.Node("next");
  Resp claim = v.env.Claim(next);
  REQUIRE(claim.status == 200);
  CHECK(claim.json["resume"]["step"] == kSteps);
  CHECK(v.Complete(next, 2, "another export\n").status == 400);
  REQUIRE(v.Complete(next, 2, honest).status == 200);
}

TEST_CASE("bound outputs: a verified job cannot complete without its final checkpoint",
          "[outputs]") {
  Verified v(0.5);
  REQUIRE(v.env.Heartbeat(v.trainer, v.job, 1, kSteps).status == 200);
  Resp r = v.Complete(v.trainer, 1, "chain\n");
  CHECK(r.status == 400);
  CHECK(r.json["error"]["message"] ==
        "the job is verified: commit the checkpoint of step 100 with its outputs before "
        "completing");
  CHECK(v.env.JobState(v.job) == "running");
  REQUIRE(v.Commit(v.trainer, 1, kSteps, Outputs("chain\n")).status == 200);
  CHECK(v.Complete(v.trainer, 1, "chain\n").status == 200);
}

TEST_CASE("bound outputs: a replay of the last segment agrees only on checkpoint and outputs",
          "[outputs]") {
  Verified v(1);
  const std::string honest = "chain of the job\n";
  REQUIRE(v.Commit(v.trainer, 1, kSteps, Outputs(honest)).status == 200);
  REQUIRE(v.Complete(v.trainer, 1, honest).status == 200);
  NodeRef a = v.env.Node("verifier-a");
  Json claim = v.ClaimReplay(a);
  CHECK(claim["stop_step"] == kSteps);
  // Without the outputs its replay exported: 400, the replay is still open.
  Resp bare = v.CommitReplay(a, claim, "ckpt-100", nullptr);
  CHECK(bare.status == 400);
  CHECK(bare.json["error"]["message"].get<std::string>().find("commit the outputs") !=
        std::string::npos);
  CHECK(v.Events()["verifications"][0]["state"] == "running");
  REQUIRE(v.CommitReplay(a, claim, "ckpt-100", Outputs(honest)).status == 200);
  Json e = v.Events();
  REQUIRE(e["verifications"].size() == 1);
  CHECK(e["verifications"][0]["verdict"] == "agree");
  CHECK(e["verifications"][0]["claimed_outputs"][0]["sha256"] == Sha256Hex(honest));
  CHECK(e["verifications"][0]["result_outputs"][0]["sha256"] == Sha256Hex(honest));
  CHECK(e["job"]["verification"]["verified"] == 1);
  CHECK(v.env.JobState(v.job) == "completed");
}

TEST_CASE("bound outputs: forged outputs on an honest checkpoint are caught by the last replay",
          "[outputs]") {
  Verified v(1);
  const std::string honest = "chain of the job\n", forged = "forged chain\n";
  // The trainer's checkpoint bytes are the honest ones; only its outputs are forged.
  REQUIRE(v.Commit(v.trainer, 1, kSteps, Outputs(forged)).status == 200);
  REQUIRE(v.Complete(v.trainer, 1, forged).status == 200);
  NodeRef a = v.env.Node("verifier-a"), b = v.env.Node("verifier-b");
  REQUIRE(v.Replay(a, "ckpt-100", Outputs(honest)).status == 200);
  Json e = v.Events();
  REQUIRE(e["verifications"].size() == 2);
  CHECK(e["verifications"][0]["verdict"] == "disagree");  // same checkpoint, other outputs
  REQUIRE(v.Replay(b, "ckpt-100", Outputs(honest)).status == 200);
  e = v.Events();
  CHECK(e["verifications"][1]["verdict"] == "trainer_bad");
  CHECK(v.env.Scalar("SELECT count(*) FROM nodes WHERE id = ? AND state = 'quarantined'",
                     {v.trainer.id}) == 1);
  // The forged result is withdrawn: the job is pending again, from scratch.
  CHECK(v.env.JobState(v.job) == "pending");
  CHECK(e["job"]["outputs"].empty());
  CHECK(v.env.Scalar("SELECT count(*) FROM checkpoints WHERE job_id = ?", {v.job}) == 0);
}

TEST_CASE("bound outputs: outputs on a replay of an earlier segment are refused", "[outputs]") {
  Verified v(1);
  REQUIRE(v.Commit(v.trainer, 1, 50, nullptr).status == 200);
  NodeRef a = v.env.Node("verifier-a");
  Resp r = v.Replay(a, "ckpt-50", Outputs("x"));
  CHECK(r.status == 400);
  CHECK(r.json["error"]["message"] == "outputs come only with a replay of the job's last segment");
}
