// Storage hygiene: maintenance forgets objects nothing refers to after the grace period, and a
// developer's pending upload reservations are bounded in number (429) and bytes (413).
#include <algorithm>

#include "coordinator/core/verification.h"
#include "tests/unit/core/test_env.h"

using namespace gleaner;
using namespace gleaner::testing;

namespace {
std::string Key(const Resp& r) {
  return r.json["key"].get<std::string>();
}
bool Has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}
}  // namespace

TEST_CASE("maintenance deletes uncommitted and unreferenced objects after the grace", "[hygiene]") {
  CoreConfig config = TestConfig();
  config.uncommitted_grace_s = config.blob_gc_grace_s;  // lease_quota_test.cc has the shorter one
  TestEnv env(config);
  const std::string dev = env.Developer();
  const std::string job = env.Submit(dev, 100);
  NodeRef node = env.Node("pc");
  REQUIRE(env.ClaimedJob(node) == job);
  const std::string base = "/v1/jobs/" + job;
  REQUIRE(env.Checkpoint(node, job, 1, 10).status == 200);
  const std::string committed = env.Query("SELECT key FROM checkpoints").Get(0, "key").AsText();
  Resp loose = env.Post(base + "/checkpoints", node.token, {{"epoch", 1}, {"step", 20}});
  REQUIRE(loose.status == 200);
  env.StoreBlob(Key(loose), "never committed");
  Resp extra = env.Post(base + "/outputs", node.token, {{"epoch", 1}, {"name", "extra.txt"}});
  REQUIRE(extra.status == 200);
  env.StoreBlob(Key(extra), "not part of the result");
  REQUIRE(env.Complete(node, job, 1).status == 200);
  const std::string result = "jobs/" + job + "/out/e1/chain.txt";
  Resp reserved = env.Post("/v1/uploads", dev,
                           {{"name", "never.bin"}, {"size", 5}, {"sha256", Sha256Hex("never")}});
  REQUIRE(reserved.status == 201);
  Resp kept = env.Post("/v1/uploads", dev,
                       {{"name", "data.bin"}, {"size", 4}, {"sha256", Sha256Hex("data")}});
  REQUIRE(kept.status == 201);
  env.StoreBlob(Key(kept), "data");

  env.Advance(86400 - 10);  // within the grace: nothing goes
  Resp early = env.Post("/v1/admin/maintenance", env.operator_token);
  REQUIRE(early.status == 200);
  CHECK(early.deletes.empty());
  CHECK(early.json["reservations_dropped"] == 0);
  env.Advance(20);
  Resp tick = env.Post("/v1/admin/maintenance", env.operator_token);
  REQUIRE(tick.status == 200);
  CHECK(tick.deletes.size() == 2);
  CHECK(Has(tick.deletes, Key(loose)));
  CHECK(Has(tick.deletes, Key(extra)));
  CHECK(tick.json["objects_deleted"] == 2);
  CHECK(tick.json["reservations_dropped"] == 1);
  for (const std::string& k : {committed, result, Key(kept)}) {
    INFO(k);
    CHECK(env.Scalar("SELECT count(*) FROM blobs WHERE key = ?", {k}) == 1);
  }
  CHECK(env.Scalar("SELECT count(*) FROM blobs WHERE key = ?", {Key(loose)}) == 0);
  CHECK(env.Scalar("SELECT count(*) FROM uploads WHERE key = ?", {Key(reserved)}) == 0);
  CHECK(env.Scalar("SELECT count(*) FROM uploads WHERE key = ?", {Key(kept)}) == 1);
  // Nothing more to do on the next tick.
  CHECK(env.Post("/v1/admin/maintenance", env.operator_token).deletes.empty());
}

TEST_CASE("maintenance keeps the outputs of a running job", "[hygiene]") {
  TestEnv env;
  const std::string dev = env.Developer();
  const std::string job = env.Submit(dev, 100);
  NodeRef node = env.Node("pc");
  REQUIRE(env.ClaimedJob(node) == job);
  Resp out = env.Post("/v1/jobs/" + job + "/outputs", node.token, {{"epoch", 1}, {"name", "a"}});
  REQUIRE(out.status == 200);
  env.StoreBlob(Key(out), "a");
  env.Advance(2 * 86400);
  CHECK(env.Post("/v1/admin/maintenance", env.operator_token).deletes.empty());
}

TEST_CASE(
    "maintenance deletes a replay's upload that was never committed, once no replay of "
    "its job is open",
    "[hygiene]") {
  TestEnv env;
  const std::string job = env.Submit(env.Developer(), 100);
  env.Query(
      "INSERT INTO verifications (id, job_id, round, step_from, step, claimed_sha256, "
      "trainer_node, state, created_at) VALUES ('v_gc', ?, 1, 0, 10, ?, 'n_x', 'pending', ?)",
      {job, std::string(64, 'a'), env.now_ms});
  const std::string key = core::VerificationKey(job, "v_gc", 1);
  env.StoreBlob(key, "an upload its node never committed");
  env.Query("UPDATE verifications SET state = 'running'");
  env.Advance(2 * 86400);
  CHECK(env.Post("/v1/admin/maintenance", env.operator_token).deletes.empty());
  env.Query("UPDATE verifications SET state = 'void'");
  Resp tick = env.Post("/v1/admin/maintenance", env.operator_token);
  CHECK(tick.deletes == std::vector<std::string>{key});
}

TEST_CASE("maintenance voids replays no node claimed within the grace", "[hygiene]") {
  TestEnv env;
  env.Node("m-any");  // a node that could take the replay: it is not unverifiable
  const std::string job = env.Submit(env.Developer(), 100);
  env.Query(
      "INSERT INTO verifications (id, job_id, round, step_from, step, claimed_sha256, "
      "trainer_node, state, created_at) VALUES ('v_old', ?, 1, 0, 10, ?, 'n_x', 'pending', ?)",
      {job, std::string(64, 'a'), env.now_ms});
  env.Advance(86400 - 10);
  CHECK(env.Post("/v1/admin/maintenance", env.operator_token).json["verifications_voided"] == 0);
  env.Advance(20);
  CHECK(env.Post("/v1/admin/maintenance", env.operator_token).json["verifications_voided"] == 1);
  CHECK(env.Scalar("SELECT count(*) FROM verifications WHERE state = 'void'") == 1);
}

TEST_CASE("uploads: pending reservations per developer are bounded in number and bytes",
          "[hygiene]") {
  CoreConfig config = TestConfig();
  config.max_pending_uploads = 2;
  config.max_pending_upload_bytes = 100;
  TestEnv env(config);
  const std::string dev = env.Developer();
  auto reserve = [&](const std::string& token, int64_t size) {
    return env.Post(
        "/v1/uploads", token,
        {{"name", "d.bin"}, {"size", size}, {"sha256", Sha256Hex(std::string(size_t(size), 'x'))}});
  };
  Resp a = reserve(dev, 40);
  REQUIRE(a.status == 201);
  REQUIRE(reserve(dev, 40).status == 201);
  Resp third = reserve(dev, 10);
  CHECK(third.status == 429);
  CHECK(third.ErrorCode() == "too_many_uploads");
  CHECK(third.json["error"]["message"].get<std::string>().find("limit 2") != std::string::npos);
  CHECK(env.Scalar("SELECT count(*) FROM uploads") == 2);
  // A stored upload no longer counts; bytes are bounded too.
  env.StoreBlob(Key(a), std::string(40, 'x'));
  Resp big = reserve(dev, 70);
  CHECK(big.status == 413);
  CHECK(big.json["error"]["message"].get<std::string>().find("100 bytes") != std::string::npos);
  CHECK(reserve(dev, 60).status == 201);
  // Another developer has a budget of its own; operators are not bounded.
  CHECK(reserve(env.Developer(), 100).status == 201);
  CHECK(reserve(env.operator_token, 1000).status == 201);
  // Reservations older than the grace no longer count.
  env.Advance(86400 + 1);
  CHECK(reserve(dev, 100).status == 201);
}
