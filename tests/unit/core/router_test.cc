// The request pipeline: 404/405/413/401/403, bad bodies, and the role x route table.
#include "coordinator/core/router.h"

#include <fstream>
#include <sstream>

#include "tests/unit/core/test_env.h"

using namespace gleaner;
using namespace gleaner::testing;

namespace {
std::string Fill(std::string pattern) {
  auto replace = [&](const std::string& from, const std::string& to) {
    size_t p = pattern.find(from);
    if (p != std::string::npos) pattern.replace(p, from.size(), to);
  };
  replace("{id}", "x_1");
  replace("{step}", "1");
  return pattern;
}
}  // namespace

TEST_CASE("healthz needs no token", "[router]") {
  TestEnv env;
  Resp r = env.Get("/healthz", "");
  CHECK(r.status == 200);
  CHECK(r.json["ok"] == true);
}

TEST_CASE("unknown route 404, wrong method 405 with Allow", "[router]") {
  TestEnv env;
  Resp nf = env.Get("/v1/nothing", env.operator_token);
  CHECK(nf.status == 404);
  CHECK(nf.ErrorCode() == "not_found");
  CHECK(env.Get("/v1/jobs/a/b/c/d/e", env.operator_token).status == 404);
  CHECK(env.Get("", env.operator_token).status == 404);
  Resp m = env.Raw("DELETE", "/v1/jobs", env.operator_token, "");
  CHECK(m.status == 405);
  CHECK(m.ErrorCode() == "method_not_allowed");
  CHECK(m.Header("Allow") == "POST, GET");
  CHECK(env.Get("/v1/jobs/j_1/heartbeat", env.operator_token).status == 405);
  CHECK(env.Raw("POST", "/v1/prices", env.operator_token, "{}").status == 405);
}

TEST_CASE("401 for a missing, malformed, unknown or revoked token", "[router]") {
  TestEnv env;
  CHECK(env.Get("/v1/jobs", "").status == 401);
  CHECK(env.Raw("GET", "/v1/jobs", "", "", {{"authorization", "Basic abc"}}).status == 401);
  CHECK(env.Raw("GET", "/v1/jobs", "", "", {{"authorization", "Bearer "}}).status == 401);
  CHECK(env.Get("/v1/jobs", "glt_unknown").status == 401);
  Resp r = env.Raw("GET", "/v1/jobs", "", "", {{"authorization", "bearer " + env.operator_token}});
  CHECK(r.status == 200);  // scheme is case-insensitive
  std::string dev = env.Developer();
  env.Query("UPDATE api_keys SET revoked_at = 1 WHERE role = 'developer'");
  Resp revoked = env.Get("/v1/jobs", dev);
  CHECK(revoked.status == 401);
  CHECK(revoked.ErrorCode() == "unauthenticated");
}

TEST_CASE("node re-registration keeps the node id and revokes the old token", "[router]") {
  TestEnv env;
  const std::string enroll = env.Key("enroll");
  Json body = {{"machine_id", "machine-1"},
               {"gpu", {{"name", "RTX 4090"}, {"vram_mb", 24000}}},
               {"agent_version", "0.1.0"}};
  Resp r1 = env.Post("/v1/nodes/register", enroll, body);
  REQUIRE(r1.status == 200);
  NodeRef first{r1.json["node_id"].get<std::string>(), r1.json["token"].get<std::string>()};
  body["gpu"] = {{"name", "RTX 6000"}, {"vram_mb", 48000}};
  body["node_secret"] = r1.json["node_secret"];
  Resp r2 = env.Post("/v1/nodes/register", enroll, body);
  REQUIRE(r2.status == 200);
  NodeRef second{r2.json["node_id"].get<std::string>(), r2.json["token"].get<std::string>()};
  CHECK(second.id == first.id);
  CHECK(second.token != first.token);
  CHECK(env.Claim(first).status == 401);
  CHECK(env.Claim(second).status == 204);
  CHECK(env.Scalar("SELECT vram_mb FROM nodes WHERE id = ?", {first.id}) == 48000);
  CHECK(env.Scalar("SELECT count(*) FROM nodes") == 1);
}

TEST_CASE("413 for a body over max_request_body, before anything else", "[router]") {
  auto config = TestConfig();
  config.max_request_body = 100;
  TestEnv env(config);
  std::string dev = env.Developer();
  std::string big = "{\"kind\":\"synthetic\",\"pad\":\"" + std::string(200, 'x') + "\"}";
  std::string before = env.Snapshot();
  Resp r = env.Raw("POST", "/v1/jobs", dev, big);
  CHECK(r.status == 413);
  CHECK(r.ErrorCode() == "too_large");
  CHECK(env.Raw("POST", "/v1/jobs", "", big).status == 413);
  CHECK(env.Snapshot() == before);
}

TEST_CASE("malformed bodies are 400 on every JSON route and change nothing", "[router]") {
  TestEnv env;
  std::string dev = env.Developer();
  std::string job = env.Submit(dev);
  NodeRef n = env.Node("n");
  REQUIRE(env.ClaimedJob(n) == job);
  std::string before = env.Snapshot();
  const std::string bodies[] = {"{",
                                "[1,2]",
                                "\"str\"",
                                "nul",
                                "{\"a\":}",
                                std::string("{\"\xff\":1"),
                                std::string(100, '[') + std::string(100, ']')};
  for (const core::RouteInfo& route : core::Routes()) {
    if (!route.json_body) continue;
    std::string path = Fill(route.pattern);
    if (path.find("x_1") != std::string::npos && path.rfind("/v1/jobs/", 0) == 0) {
      path.replace(path.find("x_1"), 3, job);
    }
    std::string token = (route.roles & core::kRoleNode)       ? n.token
                        : (route.roles & core::kRoleOperator) ? env.operator_token
                                                              : dev;
    for (const std::string& body : bodies) {
      Resp r = env.Raw(route.method, path, token, body);
      INFO(route.method << " " << path << " body " << body << " -> " << r.body);
      CHECK(r.status == 400);
      CHECK(r.ErrorCode() == "bad_request");
    }
  }
  CHECK(env.Snapshot() == before);
}

TEST_CASE("node writes with missing or wrong-typed fields are 400 and change nothing", "[router]") {
  TestEnv env;
  std::string dev = env.Developer();
  std::string job = env.Submit(dev);
  NodeRef n = env.Node("n");
  REQUIRE(env.ClaimedJob(n) == job);
  std::string before = env.Snapshot();
  const std::string b = "/v1/jobs/" + job;
  struct Case {
    std::string path;
    Json body;
  };
  const std::string sha = Sha256Hex("x");
  const Case cases[] = {
      {b + "/heartbeat", Json::object()},
      {b + "/heartbeat", {{"epoch", 1}}},
      {b + "/heartbeat", {{"epoch", "1"}, {"step", 1}}},
      {b + "/heartbeat", {{"epoch", 1}, {"step", -1}}},
      {b + "/heartbeat", {{"epoch", 0}, {"step", 1}}},
      {b + "/heartbeat", {{"epoch", 1}, {"step", 1}, {"loss", "low"}}},
      {b + "/heartbeat", {{"epoch", 1}, {"step", 101}}},
      {b + "/checkpoints", {{"epoch", 1}}},
      {b + "/checkpoints", {{"epoch", 1}, {"step", 0}}},
      {b + "/checkpoints/abc/commit", {{"epoch", 1}, {"sha256", sha}, {"size", 1}}},
      {b + "/checkpoints/0/commit", {{"epoch", 1}, {"sha256", sha}, {"size", 1}}},
      {b + "/checkpoints/5/commit", {{"epoch", 1}, {"sha256", "XYZ"}, {"size", 1}}},
      {b + "/checkpoints/5/commit", {{"epoch", 1}, {"sha256", sha}, {"size", -1}}},
      {b + "/checkpoints/5/commit", {{"epoch", 1}, {"sha256", sha}}},
      {b + "/outputs", {{"epoch", 1}}},
      {b + "/complete", {{"epoch", 1}}},
      {b + "/complete", {{"epoch", 1}, {"outputs", Json::array()}}},
      {b + "/complete", {{"epoch", 1}, {"outputs", Json::array({{{"name", "a"}}})}}},
      {b + "/complete",
       {{"epoch", 1},
        {"outputs", Json::array({{{"name", "a"}, {"sha256", sha}, {"size", 1}},
                                 {{"name", "a"}, {"sha256", sha}, {"size", 1}}})}}},
      {b + "/downloads", Json::object()},
      {b + "/downloads", {{"epoch", "1"}}},
      {b + "/downloads", {{"epoch", 0}}},
      {b + "/fail", Json::object()},
      {b + "/fail", {{"epoch", 1}, {"reason", 5}}},
      {b + "/release", {{"epoch", -3}}},
  };
  for (const Case& c : cases) {
    Resp r = env.Post(c.path, n.token, c.body);
    INFO(c.path << " " << c.body.dump() << " -> " << r.body);
    CHECK(r.status == 400);
  }
  CHECK(env.Snapshot() == before);
}

TEST_CASE("role x route: every route admits exactly its roles", "[router]") {
  TestEnv env;
  std::map<unsigned, std::string> tokens = {
      {core::kRoleDeveloper, env.Developer()},
      {core::kRoleOperator, env.operator_token},
      {core::kRoleEnroll, env.Key("enroll")},
      {core::kRoleNode, env.Node("role-test").token},
  };
  for (const core::RouteInfo& route : core::Routes()) {
    std::string path = Fill(route.pattern);
    for (const auto& [role, token] : tokens) {
      Resp r = env.Raw(route.method, path, token, "{}");
      INFO(route.method << " " << path << " as " << core::RoleName(role) << " -> " << r.body);
      if (route.roles == 0 || (route.roles & role)) {
        CHECK(r.status != 401);
        CHECK(r.status != 403);
      } else {
        CHECK(r.status == 403);
        CHECK(r.ErrorCode() == "forbidden");
      }
    }
    Resp anon = env.Raw(route.method, path, "", "{}");
    CHECK(anon.status == (route.roles == 0 ? 200 : 401));
  }
}

TEST_CASE("docs/api.md lists every route", "[router][docs]") {
  std::ifstream f(std::string(GLEANER_SOURCE_DIR) + "/docs/api.md");
  REQUIRE(f.good());
  std::stringstream ss;
  ss << f.rdbuf();
  std::string doc = ss.str();
  for (const core::RouteInfo& route : core::Routes()) {
    std::string line = std::string("`") + route.method + " " + route.pattern + "`";
    INFO(line);
    CHECK(doc.find(line) != std::string::npos);
  }
}

TEST_CASE("keys: operator mints keys of the three roles - bad roles are 400", "[router]") {
  TestEnv env;
  Resp r = env.Post("/v1/keys", env.operator_token, {{"role", "developer"}, {"name", "alice"}});
  REQUIRE(r.status == 201);
  std::string token = r.json["token"];
  CHECK(token.rfind("glt_", 0) == 0);
  CHECK(token.size() == 68);
  CHECK(env.Scalar("SELECT count(*) FROM api_keys WHERE token_hash = ?", {Sha256Hex(token)}) == 1);
  CHECK(env.Scalar("SELECT count(*) FROM api_keys WHERE token_hash = ?", {token}) == 0);
  CHECK(env.Post("/v1/keys", env.operator_token, {{"role", "node"}, {"name", "x"}}).status == 400);
  CHECK(env.Post("/v1/keys", env.operator_token, {{"role", "root"}, {"name", "x"}}).status == 400);
  CHECK(env.Post("/v1/keys", env.operator_token, {{"role", "enroll"}}).status == 400);
  CHECK(env.Post("/v1/nodes/register", env.Key("enroll"),
                 {{"machine_id", "m"},
                  {"gpu", {{"name", "x"}, {"vram_mb", -5}}},
                  {"agent_version", "1"}})
            .status == 400);
}

TEST_CASE("request paths are percent-decoded by one rule for both shells", "[router]") {
  std::string out;
  CHECK(core::DecodePath("/heal%74hz", &out));
  CHECK(out == "/healthz");
  CHECK(core::DecodePath("/a%2Fb+c", &out));  // '+' is a plus in a path
  CHECK(out == "/a/b+c");
  CHECK(core::DecodePath("/%FF", &out));  // a byte, not UTF-8 checked
  CHECK(out == "/\xFF");
  for (const char* bad : {"", "x/y", "/%zz", "/%4", "/%"}) {
    INFO(bad);
    CHECK_FALSE(core::DecodePath(bad, &out));
  }
  core::HttpResponse r = core::MalformedTarget();
  CHECK(r.status == 400);
  CHECK(r.body.find("\"bad_request\"") != std::string::npos);
}
