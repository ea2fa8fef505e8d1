// Fencing, heartbeats, checkpoints, outputs, complete, fail, release and cancel.
#include "tests/unit/core/test_env.h"

using namespace gleaner;
using namespace gleaner::testing;

namespace {
struct Running {
  std::string dev, job;
  NodeRef node;
};
Running Start(TestEnv& env, int64_t steps = 100, Json extra = Json::object()) {
  Running r;
  r.dev = env.Developer();
  r.job = env.Submit(r.dev, steps, 0, extra);
  r.node = env.Node("holder");
  REQUIRE(env.ClaimedJob(r.node) == r.job);
  return r;
}
}  // namespace

TEST_CASE("heartbeat extends the lease and records the segment", "[lease]") {
  TestEnv env;
  Running run = Start(env);
  env.Advance(30);
  Resp r = env.Post("/v1/jobs/" + run.job + "/heartbeat", run.node.token,
                    {{"epoch", 1}, {"step", 12}, {"loss", 0.5}});
  REQUIRE(r.status == 200);
  CHECK(r.json["cancel"] == false);
  CHECK(r.json["lease_expires_at"] == core::FormatTime(env.now_ms + 60000));
  int64_t first = env.now_ms;
  env.Advance(30);
  REQUIRE(env.Heartbeat(run.node, run.job, 1, 20).status == 200);
  Rows s = env.Query("SELECT * FROM segments WHERE job_id = ?", {run.job});
  CHECK(s.Get(0, "heartbeats").AsInt() == 2);
  CHECK(s.Get(0, "first_heartbeat_at").AsInt() == first);
  CHECK(s.Get(0, "last_heartbeat_at").AsInt() == env.now_ms);
  CHECK(s.Get(0, "step_end").AsInt() == 20);
  CHECK(s.Get(0, "last_loss").AsReal() == Approx(0.5));
  CHECK(env.Scalar("SELECT step_done FROM jobs WHERE id = ?", {run.job}) == 20);
  CHECK(env.Scalar("SELECT lease_expires_at FROM jobs WHERE id = ?", {run.job}) ==
        env.now_ms + 60000);
  CHECK(env.Scalar("SELECT last_seen_at FROM nodes WHERE id = ?", {run.node.id}) == env.now_ms);
  // Step never goes backwards.
  REQUIRE(env.Heartbeat(run.node, run.job, 1, 15).status == 200);
  CHECK(env.Scalar("SELECT step_done FROM jobs WHERE id = ?", {run.job}) == 20);
}

TEST_CASE(
    "fencing: stale epoch, other node, expired lease and finished jobs get 409 and change "
    "nothing",
    "[lease]") {
  TestEnv env;
  Running run = Start(env);
  NodeRef intruder = env.Node("intruder");
  const std::string base = "/v1/jobs/" + run.job;
  env.Advance(10);  // so that any stray timestamp update would show
  std::string before = env.Snapshot();
  struct Case {
    const char* what;
    NodeRef node;
    int64_t epoch;
  };
  for (const Case& c : {Case{"stale epoch", run.node, 7}, Case{"other node", intruder, 1}}) {
    INFO(c.what);
    CHECK(env.Heartbeat(c.node, run.job, c.epoch, 5).status == 409);
    CHECK(
        env.Post(base + "/checkpoints", c.node.token, {{"epoch", c.epoch}, {"step", 10}}).status ==
        409);
    CHECK(env.Post(base + "/checkpoints/10/commit", c.node.token,
                   {{"epoch", c.epoch}, {"sha256", Sha256Hex("x")}, {"size", 1}})
              .status == 409);
    CHECK(
        env.Post(base + "/outputs", c.node.token, {{"epoch", c.epoch}, {"name", "a.txt"}}).status ==
        409);
    CHECK(env.Post(base + "/complete", c.node.token,
                   {{"epoch", c.epoch},
                    {"outputs",
                     Json::array({{{"name", "a"}, {"sha256", Sha256Hex("")}, {"size", 0}}})}})
              .status == 409);
    CHECK(env.Post(base + "/fail", c.node.token, {{"epoch", c.epoch}, {"reason", "x"}}).status ==
          409);
    CHECK(env.Post(base + "/release", c.node.token, {{"epoch", c.epoch}}).status == 409);
  }
  CHECK(env.Snapshot() == before);
  // Expired lease: the holder is out too, even before anyone reclaims.
  env.Advance(61);
  Resp late = env.Heartbeat(run.node, run.job, 1, 5);
  CHECK(late.status == 409);
  CHECK(late.json["error"]["message"] == "the lease expired");
  CHECK(env.Post(base + "/release", run.node.token, {{"epoch", 1}}).status == 409);
  // Unknown job: 404.
  CHECK(env.Heartbeat(run.node, "j_nope", 1, 5).status == 404);
}

TEST_CASE("checkpoints: URL, commit moves only forward, keep N, deletes after commit", "[lease]") {
  TestEnv env;
  Running run = Start(env, 100);
  const std::string base = "/v1/jobs/" + run.job;
  Resp url = env.Post(base + "/checkpoints", run.node.token, {{"epoch", 1}, {"step", 10}});
  REQUIRE(url.status == 200);
  CHECK(url.json["key"] == "jobs/" + run.job + "/ckpt/e1/s0000000010");
  std::string u = url.json["url"];
  CHECK(u.rfind("http://blobs.test/blobs/jobs/" + run.job + "/ckpt/e1/s0000000010?m=PUT&exp=", 0) ==
        0);
  // Commit before the object is stored: 400, nothing committed.
  Resp early = env.Post(base + "/checkpoints/10/commit", run.node.token,
                        {{"epoch", 1}, {"sha256", Sha256Hex("a")}, {"size", 1}});
  CHECK(early.status == 400);
  CHECK(env.Query("SELECT ckpt_step FROM jobs WHERE id = ?", {run.job}).rows[0][0].is_null());
  // Stored with a different hash: 400.
  env.StoreBlob(url.json["key"], "a");
  CHECK(env.Post(base + "/checkpoints/10/commit", run.node.token,
                 {{"epoch", 1}, {"sha256", Sha256Hex("b")}, {"size", 1}})
            .status == 400);
  Resp ok = env.Post(base + "/checkpoints/10/commit", run.node.token,
                     {{"epoch", 1}, {"sha256", Sha256Hex("a")}, {"size", 1}});
  REQUIRE(ok.status == 200);
  CHECK(ok.json["committed"] == true);
  // A retried commit is idempotent.
  CHECK(env.Post(base + "/checkpoints/10/commit", run.node.token,
                 {{"epoch", 1}, {"sha256", Sha256Hex("a")}, {"size", 1}})
            .status == 200);
  // Older or equal steps are stale (distinct error code, not a lost lease).
  Resp stale = env.Post(base + "/checkpoints", run.node.token, {{"epoch", 1}, {"step", 10}});
  CHECK(stale.status == 409);
  CHECK(stale.ErrorCode() == "stale_checkpoint");
  REQUIRE(env.Checkpoint(run.node, run.job, 1, 20).status == 200);
  REQUIRE(env.Checkpoint(run.node, run.job, 1, 30).status == 200);
  CHECK(env.Scalar("SELECT count(*) FROM checkpoints WHERE job_id = ?", {run.job}) == 3);
  Resp fourth = env.Checkpoint(run.node, run.job, 1, 40);
  REQUIRE(fourth.status == 200);
  REQUIRE(fourth.deletes.size() == 1);
  CHECK(fourth.deletes[0] == "jobs/" + run.job + "/ckpt/e1/s0000000010");
  CHECK(env.Scalar("SELECT count(*) FROM checkpoints WHERE job_id = ?", {run.job}) == 3);
  CHECK(env.Scalar("SELECT count(*) FROM blobs WHERE key = ?", {fourth.deletes[0]}) == 0);
  CHECK(env.Scalar("SELECT ckpt_step FROM jobs WHERE id = ?", {run.job}) == 40);
  CHECK(env.Scalar("SELECT step_committed FROM segments WHERE job_id = ?", {run.job}) == 40);
  // Committing an older step (uploaded late) never moves the job backwards.
  env.StoreBlob("jobs/" + run.job + "/ckpt/e1/s0000000035", "late");
  Resp back = env.Post(base + "/checkpoints/35/commit", run.node.token,
                       {{"epoch", 1}, {"sha256", Sha256Hex("late")}, {"size", 4}});
  CHECK(back.status == 409);
  CHECK(back.ErrorCode() == "stale_checkpoint");
  CHECK(env.Scalar("SELECT ckpt_step FROM jobs WHERE id = ?", {run.job}) == 40);
  // Beyond the job's steps: 400.
  CHECK(env.Post(base + "/checkpoints", run.node.token, {{"epoch", 1}, {"step", 101}}).status ==
        400);
  // The job view shows the latest checkpoint.
  Resp view = env.Get("/v1/jobs/" + run.job, run.dev);
  CHECK(view.json["latest_checkpoint"]["step"] == 40);
  CHECK(view.json["latest_checkpoint"]["committed_at"] == core::FormatTime(env.now_ms));
}

TEST_CASE("a zombie's commit cannot overwrite a newer lease's checkpoint", "[lease]") {
  TestEnv env;
  Running run = Start(env, 100);
  REQUIRE(env.Checkpoint(run.node, run.job, 1, 20).status == 200);
  env.Advance(61);
  NodeRef b = env.Node("b");
  REQUIRE(env.ClaimedJob(b) == run.job);
  REQUIRE(env.Checkpoint(b, run.job, 2, 30).status == 200);
  env.StoreBlob("jobs/" + run.job + "/ckpt/e1/s0000000050", "zombie");
  Resp z = env.Post("/v1/jobs/" + run.job + "/checkpoints/50/commit", run.node.token,
                    {{"epoch", 1}, {"sha256", Sha256Hex("zombie")}, {"size", 6}});
  CHECK(z.status == 409);
  CHECK(z.ErrorCode() == "conflict");
  CHECK(env.Scalar("SELECT ckpt_step FROM jobs WHERE id = ?", {run.job}) == 30);
}

TEST_CASE("complete: outputs verified, segment closed, counters, result URLs", "[lease]") {
  TestEnv env;
  Running run = Start(env, 100);
  const std::string base = "/v1/jobs/" + run.job;
  CHECK(env.Get(base + "/result", run.dev).status == 409);
  // Output not stored: 400, still running.
  Resp missing =
      env.Post(base + "/complete", run.node.token,
               {{"epoch", 1},
                {"outputs",
                 Json::array({{{"name", "chain.txt"}, {"sha256", Sha256Hex("x")}, {"size", 1}}})}});
  CHECK(missing.status == 400);
  CHECK(env.JobState(run.job) == "running");
  env.Advance(30);
  REQUIRE(env.Heartbeat(run.node, run.job, 1, 90).status == 200);
  // Completion before the last step is reported: 409, still running.
  Resp out = env.Post(base + "/outputs", run.node.token, {{"epoch", 1}, {"name", "chain.txt"}});
  REQUIRE(out.status == 200);
  const std::string bytes = "chain of " + run.job + "\n";
  env.StoreBlob(out.json["key"].get<std::string>(), bytes);
  Resp early = env.Post(base + "/complete", run.node.token,
                        {{"epoch", 1},
                         {"outputs", Json::array({{{"name", "chain.txt"},
                                                   {"sha256", Sha256Hex(bytes)},
                                                   {"size", int64_t(bytes.size())}}})}});
  CHECK(early.status == 409);
  CHECK(early.json["error"]["message"].get<std::string>().find("step 90 of 100") !=
        std::string::npos);
  CHECK(env.JobState(run.job) == "running");
  CHECK(env.Scalar("SELECT jobs_completed FROM nodes WHERE id = ?", {run.node.id}) == 0);
  Resp done = env.Complete(run.node, run.job, 1);
  REQUIRE(done.status == 200);
  CHECK(done.json["state"] == "completed");
  // A retried completion (lost response) is idempotent.
  CHECK(env.Post(base + "/complete", run.node.token,
                 {{"epoch", 1},
                  {"outputs", Json::array({{{"name", "chain.txt"},
                                            {"sha256", Sha256Hex("chain of " + run.job + "\n")},
                                            {"size", int64_t(run.job.size() + 10)}}})}})
            .status == 200);
  Rows s = env.Query("SELECT * FROM segments WHERE job_id = ?", {run.job});
  CHECK(s.Get(0, "end_reason").AsText() == "completed");
  CHECK(s.Get(0, "step_end").AsInt() == 100);
  CHECK(env.Scalar("SELECT jobs_completed FROM nodes WHERE id = ?", {run.node.id}) == 1);
  Resp view = env.Get(base, run.dev);
  CHECK(view.json["state"] == "completed");
  CHECK(view.json["step"] == 100);
  CHECK(view.json["outputs"][0]["name"] == "chain.txt");
  CHECK(view.json["finished_at"] == core::FormatTime(env.now_ms));
  Resp result = env.Get(base + "/result", run.dev);
  REQUIRE(result.status == 200);
  std::string url = result.json["outputs"][0]["url"];
  CHECK(url.find("/blobs/jobs/" + run.job + "/out/e1/chain.txt?m=GET") != std::string::npos);
  // Every later write is 409.
  CHECK(env.Heartbeat(run.node, run.job, 1, 100).status == 409);
  CHECK(env.Post(base + "/fail", run.node.token, {{"epoch", 1}, {"reason", "x"}}).status == 409);
}

TEST_CASE("fail: ban, back to pending, failed after max_failures distinct failures", "[lease]") {
  TestEnv env;
  std::string dev = env.Developer();
  std::string job = env.Submit(dev, 100, 0, {{"max_failures", 2}});
  NodeRef a = env.Node("a"), b = env.Node("b"), c = env.Node("c");
  REQUIRE(env.ClaimedJob(a) == job);
  REQUIRE(env.Checkpoint(a, job, 1, 20).status == 200);
  Resp f1 = env.Post("/v1/jobs/" + job + "/fail", a.token, {{"epoch", 1}, {"reason", "exit 2"}});
  REQUIRE(f1.status == 200);
  CHECK(f1.json["state"] == "pending");
  CHECK(f1.json["failures"] == 1);
  CHECK(env.Scalar("SELECT count(*) FROM job_bans WHERE job_id = ? AND node_id = ?", {job, a.id}) ==
        1);
  CHECK(env.Scalar("SELECT step_done FROM jobs WHERE id = ?", {job}) == 20);
  CHECK(env.Claim(a).status == 204);
  REQUIRE(env.ClaimedJob(b) == job);
  Resp f2 = env.Post("/v1/jobs/" + job + "/fail", b.token, {{"epoch", 2}, {"reason", "nan loss"}});
  REQUIRE(f2.status == 200);
  CHECK(f2.json["state"] == "failed");
  CHECK(env.Claim(c).status == 204);
  Resp view = env.Get("/v1/jobs/" + job, dev);
  CHECK(view.json["state"] == "failed");
  CHECK(view.json["failures"] == 2);
  CHECK(view.json["reason"] == "nan loss");
  CHECK(env.Scalar("SELECT jobs_failed FROM nodes WHERE id = ?", {b.id}) == 1);
  Resp events = env.Get("/v1/jobs/" + job + "/events", dev);
  REQUIRE(events.status == 200);
  REQUIRE(events.json["segments"].size() == 2);
  CHECK(events.json["segments"][0]["end_reason"] == "failed");
  CHECK(events.json["segments"][0]["note"] == "exit 2");
  REQUIRE(events.json["failures"].size() == 2);
  CHECK(events.json["failures"][1]["node_id"] == b.id);
}

TEST_CASE("release: back to pending now, never a failure or a ban", "[lease]") {
  TestEnv env;
  Running run = Start(env, 100, {{"max_failures", 1}});
  REQUIRE(env.Checkpoint(run.node, run.job, 1, 50).status == 200);
  Resp r = env.Post("/v1/jobs/" + run.job + "/release", run.node.token,
                    {{"epoch", 1}, {"reason", "SIGTERM"}});
  REQUIRE(r.status == 200);
  CHECK(r.json["state"] == "pending");
  CHECK(env.Scalar("SELECT failures FROM jobs WHERE id = ?", {run.job}) == 0);
  CHECK(env.Scalar("SELECT count(*) FROM job_bans") == 0);
  CHECK(env.Query("SELECT end_reason FROM segments").rows[0][0].AsText() == "released");
  // The same node may take it again at once, resuming from 50.
  Resp again = env.Claim(run.node);
  REQUIRE(again.status == 200);
  CHECK(again.json["resume"]["step"] == 50);
  CHECK(again.json["lease"]["epoch"] == 2);
}

TEST_CASE("cancel: holder's heartbeat answers cancel, every other write is 409", "[lease]") {
  TestEnv env;
  Running run = Start(env, 100);
  NodeRef other = env.Node("other");
  const std::string base = "/v1/jobs/" + run.job;
  Resp c = env.Post(base + "/cancel", run.dev, {{"reason", "not needed"}});
  REQUIRE(c.status == 200);
  CHECK(c.json["state"] == "canceled");
  CHECK(c.json["reason"] == "not needed");
  Resp hb = env.Heartbeat(run.node, run.job, 1, 30);
  REQUIRE(hb.status == 200);
  CHECK(hb.json["cancel"] == true);
  CHECK(env.Heartbeat(other, run.job, 1, 30).status == 409);
  CHECK(env.Heartbeat(run.node, run.job, 2, 30).status == 409);
  CHECK(env.Post(base + "/checkpoints", run.node.token, {{"epoch", 1}, {"step", 40}}).status ==
        409);
  CHECK(env.Complete(run.node, run.job, 1).status == 409);
  CHECK(env.Post(base + "/release", run.node.token, {{"epoch", 1}}).status == 409);
  CHECK(env.Query("SELECT end_reason FROM segments").rows[0][0].AsText() == "canceled");
  CHECK(env.Claim(other).status == 204);
  // Canceling again is a no-op; canceling a completed job is 409.
  CHECK(env.Post(base + "/cancel", run.dev).status == 200);
  std::string j2 = env.Submit(run.dev, 10);
  REQUIRE(env.ClaimedJob(other) == j2);
  REQUIRE(env.Complete(other, j2, 1).status == 200);
  CHECK(env.Post("/v1/jobs/" + j2 + "/cancel", run.dev).status == 409);
  // A pending job can be canceled by an operator.
  std::string j3 = env.Submit(run.dev, 10);
  CHECK(env.Post("/v1/jobs/" + j3 + "/cancel", env.operator_token).status == 200);
  CHECK(env.JobState(j3) == "canceled");
}

TEST_CASE("outputs: names are checked, URL is scoped to the lease's epoch", "[lease]") {
  TestEnv env;
  Running run = Start(env);
  const std::string base = "/v1/jobs/" + run.job + "/outputs";
  for (const char* bad : {"../x", ".hidden", "a/b", "", "sp ace"}) {
    INFO(bad);
    CHECK(env.Post(base, run.node.token, {{"epoch", 1}, {"name", bad}}).status == 400);
  }
  Resp ok = env.Post(base, run.node.token, {{"epoch", 1}, {"name", "lora.safetensors"}});
  REQUIRE(ok.status == 200);
  CHECK(ok.json["key"] == "jobs/" + run.job + "/out/e1/lora.safetensors");
}
