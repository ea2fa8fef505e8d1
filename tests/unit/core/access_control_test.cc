// Access control, table-driven: every route x every caller (operator, developer owning the job,
// another developer, node holding the lease, another node, enroll key) x token state (valid,
// revoked, missing) against the expected HTTP status. Each cell runs on a fresh database so a
// state-changing call (complete, cancel, ...) cannot leak into the next cell.
//
// Tokens are never compared in application code: the core looks up SHA-256(token) with SQL
// equality (router.cc), so response timing can only depend on the hash, which tells an attacker
// nothing about any stored token.
#include <map>

#include "coordinator/core/router.h"
#include "coordinator/core/verification.h"
#include "tests/unit/core/test_env.h"

using namespace gleaner;
using namespace gleaner::testing;

namespace {

enum Caller { kOp, kDevOwner, kDevOther, kNodeHolder, kNodeOther, kEnroll, kCallers };
const char* const kCallerNames[] = {"operator",    "developer-owner", "developer-other",
                                    "node-holder", "node-other",      "enroll"};

// A world with one job owned by dev, held (epoch 1) by node, with checkpoint step 10 uploaded
// (but not committed), output chain.txt and sample 0 of step 10 uploaded; the holder also holds
// (epoch 1) verification v_acl of another job's segment, its replay uploaded; dev_other and
// node_other own nothing.
struct World {
  TestEnv env;
  std::string tokens[kCallers];
  std::string job, node_id, other_node_id, key_id, ckpt_sha, out_sha, sample_sha, replay_sha;
  int64_t ckpt_size = 0, out_size = 0, sample_size = 0, replay_size = 0;

  World() {
    tokens[kOp] = env.operator_token;
    tokens[kDevOwner] = env.Developer();
    tokens[kDevOther] = env.Developer();
    NodeRef holder = env.Node("holder");
    NodeRef other = env.Node("other");
    tokens[kNodeHolder] = holder.token;
    tokens[kNodeOther] = other.token;
    tokens[kEnroll] = env.Key("enroll");
    node_id = holder.id;
    other_node_id = other.id;
    key_id =
        env.Query("SELECT id FROM api_keys WHERE token_hash = ?", {Sha256Hex(tokens[kDevOther])})
            .Get(0, "id")
            .AsText();
    // One sample prompt: sample URLs and commits are for the job's prompts only.
    job = env.Submit(
        tokens[kDevOwner], 100, 0,
        {{"params",
          {{"steps", 100}, {"checkpoint_every", 10}, {"sample_prompts", Json::array({"a cat"})}}}});
    REQUIRE(env.ClaimedJob(holder) == job);
    REQUIRE(env.Heartbeat(holder, job, 1, 100).status == 200);  // the last step: may complete
    Resp url =
        env.Post("/v1/jobs/" + job + "/checkpoints", holder.token, {{"epoch", 1}, {"step", 10}});
    REQUIRE(url.status == 200);
    std::string ckpt = "checkpoint bytes";
    env.StoreBlob(url.json["key"].get<std::string>(), ckpt);
    ckpt_sha = Sha256Hex(ckpt);
    ckpt_size = int64_t(ckpt.size());
    Resp out = env.Post("/v1/jobs/" + job + "/outputs", holder.token,
                        {{"epoch", 1}, {"name", "chain.txt"}});
    REQUIRE(out.status == 200);
    std::string bytes = "output bytes";
    env.StoreBlob(out.json["key"].get<std::string>(), bytes);
    out_sha = Sha256Hex(bytes);
    out_size = int64_t(bytes.size());
    Resp sample = env.Post("/v1/jobs/" + job + "/samples", holder.token,
                           {{"epoch", 1}, {"step", 10}, {"index", 0}});
    REQUIRE(sample.status == 200);
    std::string png = "sample bytes";
    env.StoreBlob(sample.json["key"].get<std::string>(), png);
    sample_sha = Sha256Hex(png);
    sample_size = int64_t(png.size());
    std::string checked = env.Submit(tokens[kDevOther], 10);
    env.Query("UPDATE jobs SET state = 'completed' WHERE id = ?", {checked});  // not claimable
    env.Query(
        "INSERT INTO verifications (id, job_id, round, step_from, step, claimed_sha256, "
        "trainer_node, state, lease_epoch, node_id, lease_expires_at, created_at, started_at) "
        "VALUES ('v_acl', ?, 1, 0, 5, ?, ?, 'running', 1, ?, ?, ?, ?)",
        {checked, std::string(64, 'a'), other_node_id, node_id, env.now_ms + 60000, env.now_ms,
         env.now_ms});
    std::string replay = "replayed checkpoint";
    env.StoreBlob(core::VerificationKey(checked, "v_acl", 1), replay);
    replay_sha = Sha256Hex(replay);
    replay_size = int64_t(replay.size());
  }

  void Revoke(Caller c) {
    if (c == kNodeHolder || c == kNodeOther) {
      // A revoked node token is one the database no longer knows (its token was rotated or
      // the node revoked: POST /v1/nodes/{id}/revoke replaces the hash).
      env.Query("UPDATE nodes SET token_hash = 'rotated-' || id WHERE token_hash = ?",
                {Sha256Hex(tokens[c])});
    } else {
      env.Query("UPDATE api_keys SET revoked_at = ? WHERE token_hash = ?",
                {env.now_ms, Sha256Hex(tokens[c])});
    }
  }
};

struct Cell {
  const char* method;
  const char* pattern;
  // Expected status per caller with a valid token (operator, dev owner, dev other, node holder,
  // node other, enroll).
  int expect[kCallers];
};

// 403: the role may not call the route at all. 404: the role may, but the resource is not the
// caller's (developers never learn about other developers' jobs). 409: a node without the
// lease (stale or never held) is refused by the fence. A node already holding its one lease
// gets no second job (204).
const Cell kTable[] = {
    {"GET", "/healthz", {200, 200, 200, 200, 200, 200}},
    {"POST", "/v1/keys", {201, 403, 403, 403, 403, 403}},
    {"GET", "/v1/keys", {200, 403, 403, 403, 403, 403}},
    {"POST", "/v1/keys/{key}/revoke", {200, 403, 403, 403, 403, 403}},
    // {key} is a developer key: max_nodes is for enroll keys (400 once the role passed).
    {"PATCH", "/v1/keys/{key}", {400, 403, 403, 403, 403, 403}},
    {"POST", "/v1/nodes/register", {200, 403, 403, 403, 403, 200}},
    {"GET", "/v1/nodes", {200, 403, 403, 403, 403, 403}},
    {"POST", "/v1/nodes/{node}/quarantine", {200, 403, 403, 403, 403, 403}},
    {"POST", "/v1/nodes/{node}/restore", {200, 403, 403, 403, 403, 403}},
    {"POST", "/v1/nodes/{node}/revoke", {200, 403, 403, 403, 403, 403}},
    {"POST", "/v1/uploads", {201, 201, 201, 403, 403, 403}},
    {"POST", "/v1/jobs", {201, 201, 201, 403, 403, 403}},
    {"GET", "/v1/jobs", {200, 200, 200, 403, 403, 403}},
    {"GET", "/v1/jobs/{job}", {200, 200, 404, 403, 403, 403}},
    {"POST", "/v1/jobs/{job}/cancel", {200, 200, 404, 403, 403, 403}},
    {"GET", "/v1/jobs/{job}/events", {200, 200, 404, 403, 403, 403}},
    {"GET", "/v1/jobs/{job}/result", {409, 409, 404, 403, 403, 403}},
    {"GET", "/v1/jobs/{job}/samples", {200, 200, 404, 403, 403, 403}},
    {"POST", "/v1/work", {403, 403, 403, 204, 204, 403}},
    {"POST", "/v1/jobs/{job}/downloads", {403, 403, 403, 200, 409, 403}},
    {"POST", "/v1/jobs/{job}/heartbeat", {403, 403, 403, 200, 409, 403}},
    {"POST", "/v1/jobs/{job}/checkpoints", {403, 403, 403, 200, 409, 403}},
    {"POST", "/v1/jobs/{job}/checkpoints/10/commit", {403, 403, 403, 200, 409, 403}},
    {"POST", "/v1/jobs/{job}/outputs", {403, 403, 403, 200, 409, 403}},
    {"POST", "/v1/jobs/{job}/samples", {403, 403, 403, 200, 409, 403}},
    {"POST", "/v1/jobs/{job}/samples/10/commit", {403, 403, 403, 200, 409, 403}},
    {"POST", "/v1/jobs/{job}/complete", {403, 403, 403, 200, 409, 403}},
    {"POST", "/v1/jobs/{job}/fail", {403, 403, 403, 200, 409, 403}},
    {"POST", "/v1/jobs/{job}/release", {403, 403, 403, 200, 409, 403}},
    {"POST", "/v1/verifications/v_acl/heartbeat", {403, 403, 403, 200, 409, 403}},
    {"POST", "/v1/verifications/v_acl/checkpoint", {403, 403, 403, 200, 409, 403}},
    {"POST", "/v1/verifications/v_acl/commit", {403, 403, 403, 200, 409, 403}},
    {"PUT", "/v1/prices", {200, 403, 403, 403, 403, 403}},
    {"GET", "/v1/prices", {200, 403, 403, 403, 403, 403}},
    {"GET", "/v1/reports/cost", {200, 403, 403, 403, 403, 403}},
    {"GET", "/v1/reports/queue", {200, 403, 403, 403, 403, 403}},
    {"GET", "/v1/reports/autoscaler", {200, 403, 403, 403, 403, 403}},
    {"GET", "/v1/reports/cost-per-step", {200, 403, 403, 403, 403, 403}},
    {"GET", "/metrics", {200, 403, 403, 403, 403, 403}},
    {"POST", "/v1/admin/maintenance", {200, 403, 403, 403, 403, 403}},
    {"POST", "/v1/agent/releases", {201, 403, 403, 403, 403, 403}},
    // Without ?platform= the callers allowed to ask get 400; the rest are refused first.
    {"GET", "/v1/agent/release", {400, 403, 403, 400, 400, 403}},
};

// A body that the route accepts from a caller allowed to make the call.
Json BodyFor(const World& w, const std::string& pattern, Caller c) {
  if (pattern == "/v1/keys") return {{"role", "developer"}, {"name", "acl"}};
  if (pattern == "/v1/keys/{key}") return {{"max_nodes", 5}};
  if (pattern == "/v1/nodes/register") {
    return {{"machine_id", std::string("m-") + kCallerNames[c]},
            {"gpu", {{"name", "RTX 4090"}, {"vram_mb", 24000}}},
            {"agent_version", "0.1.0"}};
  }
  if (pattern == "/v1/uploads") {
    return {{"name", "data.tar"}, {"size", 10}, {"sha256", Sha256Hex("0123456789")}};
  }
  if (pattern == "/v1/jobs") {
    return {{"kind", "synthetic"}, {"params", {{"steps", 10}, {"checkpoint_every", 5}}}};
  }
  if (pattern == "/v1/nodes/{node}/quarantine") return {{"reason", "acl test"}};
  if (pattern == "/v1/jobs/{job}/downloads") return {{"epoch", 1}};
  if (pattern == "/v1/jobs/{job}/heartbeat") return {{"epoch", 1}, {"step", 12}};
  if (pattern == "/v1/jobs/{job}/checkpoints") return {{"epoch", 1}, {"step", 20}};
  if (pattern == "/v1/jobs/{job}/checkpoints/10/commit") {
    return {{"epoch", 1}, {"sha256", w.ckpt_sha}, {"size", w.ckpt_size}};
  }
  if (pattern == "/v1/jobs/{job}/outputs") return {{"epoch", 1}, {"name", "log.txt"}};
  if (pattern == "/v1/jobs/{job}/samples") return {{"epoch", 1}, {"step", 10}, {"index", 0}};
  if (pattern == "/v1/jobs/{job}/samples/10/commit") {
    return {{"epoch", 1},
            {"seed", 0},
            {"seconds", 1.5},
            {"images", Json::array({{{"index", 0},
                                     {"sha256", w.sample_sha},
                                     {"size", w.sample_size},
                                     {"prompt", "a cat"}}})}};
  }
  if (pattern == "/v1/jobs/{job}/complete") {
    return {{"epoch", 1},
            {"outputs",
             Json::array({{{"name", "chain.txt"}, {"sha256", w.out_sha}, {"size", w.out_size}}})}};
  }
  if (pattern == "/v1/jobs/{job}/fail") return {{"epoch", 1}, {"reason", "acl test"}};
  if (pattern == "/v1/jobs/{job}/release") return {{"epoch", 1}};
  if (pattern == "/v1/verifications/v_acl/heartbeat") return {{"epoch", 1}, {"step", 3}};
  if (pattern == "/v1/verifications/v_acl/checkpoint") return {{"epoch", 1}};
  if (pattern == "/v1/verifications/v_acl/commit") {
    return {{"epoch", 1}, {"sha256", w.replay_sha}, {"size", w.replay_size}};
  }
  if (pattern == "/v1/prices") return {{"gpu", "RTX 4090"}, {"usd_per_hour", 0.4}};
  if (pattern == "/v1/agent/releases") {
    std::string manifest =
        R"({"version":"1.2.3","channel":"stable","expires":2000000000,"artifacts":)"
        R"({"linux-x86_64":{"uri":"https://example.test/a","length":10,"sha256":")" +
        std::string(64, 'a') + R"("}}})";
    return {{"manifest", manifest},
            {"key_id", std::string(16, '0')},
            {"signature", std::string(128, '1')}};
  }
  return Json::object();
}

Resp Call(World& w, const Cell& cell, Caller c, const std::string& token) {
  std::string path = cell.pattern;
  auto fill = [&](const std::string& hole, const std::string& value) {
    size_t p = path.find(hole);
    if (p != std::string::npos) path.replace(p, hole.size(), value);
  };
  fill("{job}", w.job);
  fill("{node}", w.node_id);
  fill("{key}", w.key_id);
  std::string method = cell.method;
  std::string body = method == "GET" ? "" : DumpJson(BodyFor(w, cell.pattern, c));
  return w.env.Raw(method, path, token, body);
}

}  // namespace

TEST_CASE("the access table covers every route", "[acl]") {
  std::map<std::string, int> covered;
  for (const Cell& cell : kTable) {
    std::string p = cell.pattern;
    for (auto [hole, name] :
         {std::pair{"{job}", "{id}"}, std::pair{"{node}", "{id}"}, std::pair{"{key}", "{id}"},
          std::pair{"/10/", "/{step}/"}, std::pair{"v_acl", "{id}"}}) {
      size_t at = p.find(hole);
      if (at != std::string::npos) p.replace(at, std::string(hole).size(), name);
    }
    covered[std::string(cell.method) + " " + p]++;
  }
  for (const core::RouteInfo& r : core::Routes()) {
    INFO(r.method << " " << r.pattern);
    CHECK(covered[std::string(r.method) + " " + r.pattern] == 1);
  }
  CHECK(covered.size() == core::Routes().size());
}

TEST_CASE("every route x caller x token state answers the expected status", "[acl]") {
  for (const Cell& cell : kTable) {
    const core::RouteInfo* route = core::FindRoute(cell.method, cell.pattern);
    bool open = std::string(cell.pattern) == "/healthz";
    for (int ci = 0; ci < kCallers; ++ci) {
      Caller c = Caller(ci);
      for (const char* state : {"valid", "revoked", "missing"}) {
        World w;
        std::string token = w.tokens[c];
        if (std::string(state) == "revoked") w.Revoke(c);
        if (std::string(state) == "missing") token = "";
        std::string before = w.env.Snapshot();
        Resp r = Call(w, cell, c, token);
        int want = std::string(state) == "valid" || open ? cell.expect[c] : 401;
        INFO(cell.method << " " << cell.pattern << " as " << kCallerNames[c] << " (" << state
                         << "): " << r.body);
        CHECK(r.status == want);
        if (r.status >= 400) {
          CHECK(!r.ErrorCode().empty());
          // A refused call changes nothing (maintenance may run on its own; not for refusals).
          CHECK(w.env.Snapshot() == before);
        }
        (void)route;
      }
    }
  }
}
