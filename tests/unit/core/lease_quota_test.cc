// What one lease may store and who may replay a segment: per-lease output caps (count, bytes),
// the uncommitted checkpoint bytes cap, maintenance collecting uncommitted objects after the
// grace (built-in store and S3), sample captions taken from the job, and replays refused to
// nodes that held a lease of the job since the segment's base checkpoint.
#include <algorithm>

#include "tests/unit/core/test_env.h"

using namespace gleaner;
using namespace gleaner::testing;

namespace {

bool Has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

std::string Message(const Resp& r) {
  return r.json["error"]["message"].get<std::string>();
}

// Lets `seconds` pass while the node keeps its lease (a heartbeat every 30 s).
void Hold(TestEnv& env, const NodeRef& node, const std::string& job, int64_t epoch, int seconds,
          int64_t step) {
  for (int t = 0; t < seconds; t += 30) {
    env.Advance(std::min(30, seconds - t));
    REQUIRE(env.Heartbeat(node, job, epoch, step).status == 200);
  }
}

}  // namespace

TEST_CASE("verification: no replay for a node that held a lease of the job since its base",
          "[verification][quota]") {
  TestEnv env;
  const std::string dev = env.Developer();
  const std::string job = env.Submit(dev, 100, 0, {{"verify_fraction", 1}});
  NodeRef early = env.Node("early"), trainer = env.Node("trainer"), later = env.Node("later");
  NodeRef fresh = env.Node("fresh");
  const std::string base = "/v1/jobs/" + job;
  // early: a lease that reached step 5 and committed nothing (before checkpoint 10).
  REQUIRE(env.ClaimedJob(early) == job);
  REQUIRE(env.Heartbeat(early, job, 1, 5).status == 200);
  REQUIRE(env.Post(base + "/release", early.token, {{"epoch", 1}}).status == 200);
  // trainer: 0 -> 10 -> 20, each commit opens a replay.
  REQUIRE(env.ClaimedJob(trainer) == job);
  REQUIRE(env.Checkpoint(trainer, job, 2, 10).status == 200);
  REQUIRE(env.Checkpoint(trainer, job, 2, 20).status == 200);
  REQUIRE(env.Post(base + "/release", trainer.token, {{"epoch", 2}}).status == 200);
  // later: resumed from checkpoint 20 (it downloaded both results), and holds the job.
  REQUIRE(env.ClaimedJob(later) == job);
  auto verify_claim = [&](const NodeRef& n) {
    return env.Post("/v1/work", n.token, {{"verify", true}});
  };
  Resp none = verify_claim(later);
  INFO(none.body);
  CHECK(none.status == 204);
  // early held a lease from step 0 (the first segment's base) but not since checkpoint 10: the
  // replay of 10 -> 20 only.
  Resp second = verify_claim(early);
  INFO(second.body);
  REQUIRE(second.status == 200);
  REQUIRE(second.json.contains("verification"));
  CHECK(second.json["verification"]["stop_step"] == 20);
  // A node that never held the job takes the first segment.
  Resp first = verify_claim(fresh);
  REQUIRE(first.status == 200);
  REQUIRE(first.json.contains("verification"));
  CHECK(first.json["verification"]["stop_step"] == 10);
  CHECK(env.Scalar("SELECT count(*) FROM verifications WHERE node_id IN (?, ?)",
                   {later.id, trainer.id}) == 0);
}

TEST_CASE("quota: a lease's outputs are capped in number and bytes", "[quota]") {
  CoreConfig config = TestConfig();
  config.lease_max_outputs = 2;
  config.lease_max_output_bytes = 100;
  TestEnv env(config);
  const std::string job = env.Submit(env.Developer(), 100);
  NodeRef node = env.Node("pc");
  REQUIRE(env.ClaimedJob(node) == job);
  const std::string url = "/v1/jobs/" + job + "/outputs";
  Resp a = env.Post(url, node.token, {{"epoch", 1}, {"name", "a.bin"}, {"size", 60}});
  INFO(a.body);
  REQUIRE(a.status == 200);
  CHECK(a.json["max_size"] == 60);
  CHECK(a.json["url"].get<std::string>().find("max=60") != std::string::npos);
  // Without a size: what remains; a size beyond it is refused.
  Resp over = env.Post(url, node.token, {{"epoch", 1}, {"name", "b.bin"}, {"size", 41}});
  CHECK(over.status == 413);
  CHECK(over.ErrorCode() == "quota_exceeded");
  CHECK(Message(over).find("60 of 100 bytes") != std::string::npos);
  Resp b = env.Post(url, node.token, {{"epoch", 1}, {"name", "b.bin"}});
  REQUIRE(b.status == 200);
  CHECK(b.json["max_size"] == 40);
  // A third name is refused; asking again for a name it has is not a new output.
  Resp c = env.Post(url, node.token, {{"epoch", 1}, {"name", "c.bin"}, {"size", 1}});
  CHECK(c.status == 413);
  CHECK(Message(c).find("holds 2 outputs (limit 2)") != std::string::npos);
  Resp again = env.Post(url, node.token, {{"epoch", 1}, {"name", "a.bin"}, {"size", 60}});
  CHECK(again.status == 200);
  // Once the store holds a.bin, it counts with its real size.
  env.StoreBlob(a.json["key"].get<std::string>(), std::string(10, 'x'));
  Resp b2 = env.Post(url, node.token, {{"epoch", 1}, {"name", "b.bin"}});
  REQUIRE(b2.status == 200);
  CHECK(b2.json["max_size"] == 90);
  // Another lease has its own allowance; a size beyond max-output-bytes is a bad request.
  CHECK(
      env.Post(url, node.token, {{"epoch", 1}, {"name", "d"}, {"size", int64_t(1) << 40}}).status ==
      400);
}

TEST_CASE("quota: uncommitted checkpoint bytes of a lease are capped", "[quota]") {
  CoreConfig config = TestConfig();
  config.lease_max_uncommitted_bytes = 1000;
  config.max_checkpoint_bytes = 600;
  TestEnv env(config);
  const std::string job = env.Submit(env.Developer(), 100);
  NodeRef node = env.Node("pc");
  REQUIRE(env.ClaimedJob(node) == job);
  const std::string url = "/v1/jobs/" + job + "/checkpoints";
  Resp s10 = env.Post(url, node.token, {{"epoch", 1}, {"step", 10}});
  INFO(s10.body);
  REQUIRE(s10.status == 200);
  CHECK(s10.json["max_size"] == 600);
  Resp s20 = env.Post(url, node.token, {{"epoch", 1}, {"step", 20}});
  REQUIRE(s20.status == 200);
  CHECK(s20.json["max_size"] == 400);
  Resp s30 = env.Post(url, node.token, {{"epoch", 1}, {"step", 30}, {"size", 1}});
  INFO(s30.body);
  CHECK(s30.status == 413);
  CHECK(s30.ErrorCode() == "quota_exceeded");
  CHECK(Message(s30).find("uncommitted") != std::string::npos);
  // A commit frees what it committed.
  const std::string bytes = "checkpoint ten";
  env.StoreBlob(s10.json["key"].get<std::string>(), bytes);
  Resp commit =
      env.Post(url + "/10/commit", node.token,
               {{"epoch", 1}, {"sha256", Sha256Hex(bytes)}, {"size", int64_t(bytes.size())}});
  REQUIRE(commit.status == 200);
  Resp s30b = env.Post(url, node.token, {{"epoch", 1}, {"step", 30}, {"size", 500}});
  INFO(s30b.body);
  CHECK(s30b.status == 200);
  CHECK(s30b.json["max_size"] == 500);
  // Steps not after the last committed one, or beyond the job, are refused as before.
  CHECK(env.Post(url, node.token, {{"epoch", 1}, {"step", 10}}).status == 409);
  CHECK(env.Post(url, node.token, {{"epoch", 1}, {"step", 101}}).status == 400);
}

TEST_CASE("quota: maintenance collects uncommitted objects after the grace, never committed ones",
          "[quota][hygiene]") {
  CoreConfig config = TestConfig();
  config.uncommitted_grace_s = 3600;
  config.progress_timeout_s = 0;  // the lease is held an hour at one step on purpose
  TestEnv env(config);
  const std::string job = env.Submit(env.Developer(), 100);
  NodeRef first = env.Node("first"), second = env.Node("second");
  const std::string base = "/v1/jobs/" + job;
  REQUIRE(env.ClaimedJob(first) == job);
  REQUIRE(env.Checkpoint(first, job, 1, 10).status == 200);
  const std::string committed = env.Query("SELECT key FROM checkpoints").Get(0, "key").AsText();
  Resp loose = env.Post(base + "/checkpoints", first.token, {{"epoch", 1}, {"step", 20}});
  REQUIRE(loose.status == 200);
  env.StoreBlob(loose.json["key"].get<std::string>(), "never committed");
  Resp old_out = env.Post(base + "/outputs", first.token, {{"epoch", 1}, {"name", "old.bin"}});
  REQUIRE(old_out.status == 200);
  REQUIRE(env.Post(base + "/release", first.token, {{"epoch", 1}}).status == 200);
  REQUIRE(env.ClaimedJob(second) == job);
  Resp cur_out = env.Post(base + "/outputs", second.token, {{"epoch", 2}, {"name", "new.bin"}});
  REQUIRE(cur_out.status == 200);

  Hold(env, second, job, 2, 3599, 15);
  Resp early = env.Post("/v1/admin/maintenance", env.operator_token);
  REQUIRE(early.status == 200);
  CHECK(early.deletes.empty());
  Hold(env, second, job, 2, 2, 16);
  Resp tick = env.Post("/v1/admin/maintenance", env.operator_token);
  INFO(tick.body);
  REQUIRE(tick.status == 200);
  CHECK(tick.json["uncommitted_collected"] == 2);
  CHECK(Has(tick.deletes, loose.json["key"].get<std::string>()));
  CHECK(Has(tick.deletes, old_out.json["key"].get<std::string>()));
  CHECK_FALSE(Has(tick.deletes, committed));
  CHECK_FALSE(Has(tick.deletes, cur_out.json["key"].get<std::string>()));  // its lease runs
  CHECK(env.Scalar("SELECT count(*) FROM blobs WHERE key = ?", {committed}) == 1);
  CHECK(env.Scalar("SELECT count(*) FROM blobs WHERE key = ?",
                   {loose.json["key"].get<std::string>()}) == 0);
  CHECK(env.Post("/v1/admin/maintenance", env.operator_token).deletes.empty());
}

TEST_CASE("quota: with S3 the minted keys are collected, and a collected one is never committed",
          "[quota][hygiene]") {
  CoreConfig config = TestConfig();
  config.s3.endpoint = "http://s3.test";
  config.s3.bucket = "bucket";
  config.s3.access_key_id = "AKIDEXAMPLE";
  config.s3.secret_access_key = "secret";
  config.progress_timeout_s = 0;  // the lease is held an hour at one step on purpose
  TestEnv env(config);
  const std::string job = env.Submit(env.Developer(), 100);
  NodeRef node = env.Node("pc");
  REQUIRE(env.ClaimedJob(node) == job);
  const std::string base = "/v1/jobs/" + job;
  Resp url = env.Post(base + "/checkpoints", node.token, {{"epoch", 1}, {"step", 10}});
  REQUIRE(url.status == 200);
  const std::string key = url.json["key"].get<std::string>();
  Hold(env, node, job, 1, 3601, 9);  // the lease lives on; no commit arrives
  Resp tick = env.Post("/v1/admin/maintenance", env.operator_token);
  INFO(tick.body);
  CHECK(tick.deletes == std::vector<std::string>{key});
  Resp late = env.Post(base + "/checkpoints/10/commit", node.token,
                       {{"epoch", 1}, {"sha256", std::string(64, 'a')}, {"size", 5}});
  INFO(late.body);
  CHECK(late.status == 400);
  CHECK(Message(late).find("no upload URL is open") != std::string::npos);
  // Minted again, the commit goes through.
  REQUIRE(env.Post(base + "/checkpoints", node.token, {{"epoch", 1}, {"step", 10}}).status == 200);
  CHECK(env.Post(base + "/checkpoints/10/commit", node.token,
                 {{"epoch", 1}, {"sha256", std::string(64, 'a')}, {"size", 5}})
            .status == 200);
  CHECK(env.Scalar("SELECT count(*) FROM lease_objects") == 0);
}

TEST_CASE("samples: captions come from the job, never from the node", "[samples][quota]") {
  TestEnv env;
  const std::string dev = env.Developer();
  const std::string job =
      env.Submit(dev, 20, 0,
                 {{"params",
                   {{"steps", 20},
                    {"checkpoint_every", 10},
                    {"sample_prompts",
                     Json::array({"a cat", {{"prompt", "a dog"}, {"negative_prompt", "blur"}}})},
                    {"sample_every", 10}}}});
  NodeRef node = env.Node("pc");
  REQUIRE(env.ClaimedJob(node) == job);
  const std::string base = "/v1/jobs/" + job;
  Json images = Json::array();
  for (int i = 0; i < 2; ++i) {
    Resp url = env.Post(base + "/samples", node.token, {{"epoch", 1}, {"step", 10}, {"index", i}});
    REQUIRE(url.status == 200);
    CHECK(url.json["max_size"] == 512 * 512 * 4 + 65536);
    const std::string bytes = "png-" + std::to_string(i);
    env.StoreBlob(url.json["key"].get<std::string>(), bytes);
    images.push_back({{"index", i},
                      {"sha256", Sha256Hex(bytes)},
                      {"size", int64_t(bytes.size())},
                      {"prompt", "visit evil.example"},
                      {"negative_prompt", "<script>"}});
  }
  // One image per prompt of the job, no more: index 2 has no prompt.
  Resp beyond = env.Post(base + "/samples", node.token, {{"epoch", 1}, {"step", 10}, {"index", 2}});
  CHECK(beyond.status == 400);
  Json one = Json::array({images[0]});
  Resp short_commit = env.Post(base + "/samples/10/commit", node.token,
                               {{"epoch", 1}, {"seed", 1}, {"seconds", 1}, {"images", one}});
  CHECK(short_commit.status == 400);
  Resp c = env.Post(base + "/samples/10/commit", node.token,
                    {{"epoch", 1}, {"seed", 1}, {"seconds", 1}, {"images", images}});
  INFO(c.body);
  REQUIRE(c.status == 200);
  Resp list = env.Get(base + "/samples", dev);
  REQUIRE(list.status == 200);
  const Json& got = list.json["steps"][0]["images"];
  CHECK(got[0]["prompt"] == "a cat");
  CHECK(got[0]["negative_prompt"] == "");
  CHECK(got[1]["prompt"] == "a dog");
  CHECK(got[1]["negative_prompt"] == "blur");
  CHECK(env.Scalar("SELECT count(*) FROM samples WHERE prompt LIKE '%evil%'") == 0);
  // Committed images no longer count against the lease.
  CHECK(env.Scalar("SELECT count(*) FROM lease_objects WHERE kind = 'sample'") == 0);
}
