// Node identity: a node proves possession of its node secret to register its machine_id again;
// the enroll token alone creates new nodes and never takes over an existing one or its lease.
#include "tests/unit/core/test_env.h"

using namespace gleaner;
using namespace gleaner::testing;

namespace {
Json Body(const std::string& machine, const std::string& secret = "") {
  Json b = {{"machine_id", machine},
            {"gpu", {{"name", "RTX 4090"}, {"vram_mb", 24000}}},
            {"agent_version", "0.1.0"}};
  if (!secret.empty()) b["node_secret"] = secret;
  return b;
}
}  // namespace

TEST_CASE("register: a new machine gets a node secret, and only its holder registers it again",
          "[nodes]") {
  TestEnv env;
  const std::string enroll = env.Key("enroll");
  Resp first = env.Post("/v1/nodes/register", enroll, Body("pc-1"));
  REQUIRE(first.status == 200);
  const std::string secret = first.json["node_secret"].get<std::string>();
  CHECK(secret.rfind("glt_", 0) == 0);
  CHECK(env.Scalar("SELECT count(*) FROM nodes WHERE secret_hash = ?", {Sha256Hex(secret)}) == 1);
  std::string before = env.Snapshot();
  // Anyone else with the enroll token: 409 naming --machine-id, nothing changes.
  for (const std::string& wrong : {std::string(""), std::string("glt_guess")}) {
    Resp other = env.Post("/v1/nodes/register", enroll, Body("pc-1", wrong));
    CHECK(other.status == 409);
    CHECK(other.json["error"]["message"].get<std::string>().find("--machine-id") !=
          std::string::npos);
  }
  CHECK(env.Snapshot() == before);
  CHECK(env.Post("/v1/work", first.json["token"].get<std::string>(), Json::object()).status == 204);
  // The node itself: same id, a new token, the old one stops working, no new secret.
  Resp again = env.Post("/v1/nodes/register", enroll, Body("pc-1", secret));
  REQUIRE(again.status == 200);
  CHECK(again.json["node_id"] == first.json["node_id"]);
  CHECK(!again.json.contains("node_secret"));
  CHECK(env.Post("/v1/work", first.json["token"].get<std::string>(), Json::object()).status == 401);
  CHECK(env.Post("/v1/work", again.json["token"].get<std::string>(), Json::object()).status == 204);
}

TEST_CASE("register: the enroll token never takes over a live lease", "[nodes]") {
  TestEnv env;
  const std::string dev = env.Developer();
  const std::string job = env.Submit(dev, 100);
  NodeRef holder = env.Node("victim");
  REQUIRE(env.ClaimedJob(holder) == job);
  // A node registered before node secrets existed: no secret stored.
  env.Query("UPDATE nodes SET secret_hash = NULL WHERE id = ?", {holder.id});
  const std::string enroll = env.Key("enroll");
  Resp impostor = env.Post("/v1/nodes/register", enroll, Body("victim"));
  CHECK(impostor.status == 409);
  CHECK(env.Heartbeat(holder, job, 1, 5).status == 200);
  // Once the lease has ended, such a node is adopted by the next registration (a new secret).
  env.Advance(3600);
  Resp adopted = env.Post("/v1/nodes/register", enroll, Body("victim"));
  REQUIRE(adopted.status == 200);
  CHECK(adopted.json["node_id"] == holder.id);
  CHECK(adopted.json.contains("node_secret"));
}

TEST_CASE("quarantine extended to an enroll key catches the machine's replacement identities",
          "[nodes]") {
  TestEnv env;
  const std::string owner = env.Key("enroll");
  const std::string others = env.Key("enroll");
  Resp bad = env.Post("/v1/nodes/register", owner, Body("pc-bad"));
  REQUIRE(bad.status == 200);
  const std::string bad_id = bad.json["node_id"].get<std::string>();
  // A plain quarantine extends to nothing: the owner's next machine starts active.
  REQUIRE(
      env.Post("/v1/nodes/" + bad_id + "/quarantine", env.operator_token, Json::object()).status ==
      200);
  CHECK(env.Post("/v1/nodes/register", owner, Body("pc-2")).json["state"] == "active");
  // Extended: a new machine_id from the same enroll key starts quarantined, naming the node...
  Resp q = env.Post("/v1/nodes/" + bad_id + "/quarantine", env.operator_token,
                    Json{{"reason", "bad outputs"}, {"extend_to_enroll_key", true}});
  REQUIRE(q.status == 200);
  Resp back = env.Post("/v1/nodes/register", owner, Body("pc-bad-renamed"));
  REQUIRE(back.status == 200);
  CHECK(back.json["state"] == "quarantined");
  CHECK(env.Post("/v1/work", back.json["token"].get<std::string>(), Json::object()).status == 204);
  CHECK(env.Scalar("SELECT count(*) FROM nodes WHERE machine_id = 'pc-bad-renamed' AND "
                   "state_reason LIKE '%" +
                   bad_id + "%'") == 1);
  // ...while other keys' machines, and machines already known, are not touched.
  CHECK(env.Post("/v1/nodes/register", others, Body("pc-other")).json["state"] == "active");
  CHECK(env.Scalar("SELECT count(*) FROM nodes WHERE machine_id = 'pc-2' AND state = 'active'") ==
        1);
  // Restoring the node ends the extension; restore takes no extend field.
  CHECK(env.Post("/v1/nodes/" + bad_id + "/restore", env.operator_token,
                 Json{{"extend_to_enroll_key", true}})
            .status == 400);
  REQUIRE(env.Post("/v1/nodes/" + bad_id + "/restore", env.operator_token, Json::object()).status ==
          200);
  CHECK(env.Post("/v1/nodes/register", owner, Body("pc-3")).json["state"] == "active");
}
