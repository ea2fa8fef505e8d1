// Key management: list and revoke API keys, revoke nodes, rotate the bootstrap operator key.
#include "tests/unit/core/test_env.h"

using namespace gleaner;
using namespace gleaner::testing;

TEST_CASE("keys: listed without tokens, and a revoked key is refused from then on", "[keys]") {
  TestEnv env;
  Resp made = env.Post("/v1/keys", env.operator_token, {{"role", "developer"}, {"name", "alice"}});
  REQUIRE(made.status == 201);
  const std::string id = made.json["id"], token = made.json["token"];
  Resp list = env.Get("/v1/keys", env.operator_token);
  REQUIRE(list.status == 200);
  REQUIRE(list.json["keys"].size() == 2);  // the bootstrap operator key and alice's
  Json alice;
  for (const Json& k : list.json["keys"]) {
    if (k["id"] == id) alice = k;
  }
  REQUIRE(alice.is_object());
  CHECK(alice["role"] == "developer");
  CHECK(alice["name"] == "alice");
  CHECK(alice["revoked_at"].is_null());
  CHECK(list.body.find(token) == std::string::npos);
  CHECK(list.body.find(Sha256Hex(token)) == std::string::npos);
  CHECK(env.Get("/v1/jobs", token).status == 200);
  Resp revoked = env.Post("/v1/keys/" + id + "/revoke", env.operator_token);
  REQUIRE(revoked.status == 200);
  CHECK(revoked.json["revoked_at"] == core::FormatTime(env.now_ms));
  CHECK(env.Get("/v1/jobs", token).status == 401);
  env.Advance(10);
  Resp again = env.Post("/v1/keys/" + id + "/revoke", env.operator_token);
  CHECK(again.status == 200);
  CHECK(again.json["revoked_at"] == revoked.json["revoked_at"]);
  CHECK(env.Post("/v1/keys/k_nope/revoke", env.operator_token).status == 404);
}

TEST_CASE("nodes: a revoked node loses its token, its secret and its lease", "[keys]") {
  TestEnv env;
  const std::string enroll = env.Key("enroll");
  Json body = {{"machine_id", "pc"},
               {"gpu", {{"name", "RTX 4090"}, {"vram_mb", 24000}}},
               {"agent_version", "0.1.0"}};
  Resp reg = env.Post("/v1/nodes/register", enroll, body);
  REQUIRE(reg.status == 200);
  NodeRef node{reg.json["node_id"].get<std::string>(), reg.json["token"].get<std::string>()};
  const std::string dev = env.Developer();
  const std::string job = env.Submit(dev, 100);
  REQUIRE(env.ClaimedJob(node) == job);
  Resp r = env.Post("/v1/nodes/" + node.id + "/revoke", env.operator_token,
                    {{"reason", "stolen token"}});
  REQUIRE(r.status == 200);
  CHECK(r.json["state"] == "quarantined");
  CHECK(r.json["state_reason"] == "stolen token");
  CHECK(r.json["revoked_at"] == core::FormatTime(env.now_ms));
  CHECK(env.Heartbeat(node, job, 1, 5).status == 401);
  body["node_secret"] = reg.json["node_secret"];
  Resp back = env.Post("/v1/nodes/register", enroll, body);
  CHECK(back.status == 403);
  CHECK(back.json["error"]["message"].get<std::string>().find("revoked") != std::string::npos);
  // The job is claimed again at once, as a stalled one.
  NodeRef next = env.Node("next");
  REQUIRE(env.ClaimedJob(next) == job);
  CHECK(env.Scalar("SELECT lease_epoch FROM jobs WHERE id = ?", {job}) == 2);
  CHECK(env.Post("/v1/nodes/n_nope/revoke", env.operator_token).status == 404);
}

TEST_CASE("bootstrap operator key: a changed environment value revokes the old one", "[keys]") {
  TestEnv env;
  const std::string old_token = env.operator_token;
  CHECK(env.Get("/v1/keys", old_token).status == 200);
  const std::string rotated = "glt_rotated_operator_token";
  REQUIRE(core::Drive(env.coord.BootstrapOperatorPlan(rotated, env.now_ms), *env.db)
              .response()
              .status == 200);
  CHECK(env.Get("/v1/keys", old_token).status == 401);
  CHECK(env.Get("/v1/keys", rotated).status == 200);
  // Booting again with the same value changes nothing; operator-made keys are untouched.
  Resp other = env.Post("/v1/keys", rotated, {{"role", "operator"}, {"name", "ops"}});
  REQUIRE(other.status == 201);
  REQUIRE(core::Drive(env.coord.BootstrapOperatorPlan(rotated, env.now_ms), *env.db)
              .response()
              .status == 200);
  CHECK(env.Get("/v1/keys", rotated).status == 200);
  CHECK(env.Get("/v1/keys", other.json["token"].get<std::string>()).status == 200);
}
