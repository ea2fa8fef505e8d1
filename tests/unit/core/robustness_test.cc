// Random requests against every route: never a crash, never a 5xx, always the error envelope.
#include <random>

#include "coordinator/core/router.h"
#include "tests/unit/core/test_env.h"

using namespace gleaner;
using namespace gleaner::testing;

namespace {

Json RandomValue(std::mt19937_64& rng, int depth = 0) {
  switch (rng() % (depth > 2 ? 8 : 10)) {
    case 0:
      return nullptr;
    case 1:
      return bool(rng() % 2);
    case 2:
      return int64_t(rng() % 200) - 50;
    case 3:
      return int64_t(rng());
    case 4:
      return double(int64_t(rng() % 2000) - 1000) / 7.0;
    case 5:
      return std::string(rng() % 3 == 0 ? 300 : rng() % 20, char('a' + rng() % 26));
    case 6:
      return Sha256Hex(std::to_string(rng() % 4));
    case 7:
      return "blob://uploads/u_1/x";
    case 8: {
      Json a = Json::array();
      for (int i = 0, n = int(rng() % 3); i < n; ++i) a.push_back(RandomValue(rng, depth + 1));
      return a;
    }
    default: {
      Json o = Json::object();
      const char* keys[] = {"steps", "name", "sha256", "size", "uri", "vram_mb", "config"};
      for (int i = 0, n = int(rng() % 3); i < n; ++i) {
        o[keys[rng() % 7]] = RandomValue(rng, depth + 1);
      }
      return o;
    }
  }
}

Json RandomBody(std::mt19937_64& rng) {
  static const char* const kFields[] = {
      "epoch",        "step", "loss",       "sha256", "size",          "name",         "reason",
      "outputs",      "kind", "params",     "model",  "dataset",       "requirements", "priority",
      "max_failures", "role", "machine_id", "gpu",    "agent_version", "usd_per_hour"};
  Json body = Json::object();
  for (int i = 0, n = int(rng() % 6); i < n; ++i) body[kFields[rng() % 20]] = RandomValue(rng);
  if (rng() % 4 == 0) body["epoch"] = 1;
  if (rng() % 4 == 0) body["kind"] = rng() % 2 ? "synthetic" : "lora-sd";
  return body;
}

}  // namespace

TEST_CASE("random requests never crash and never answer 5xx", "[robustness]") {
  TestEnv env;
  std::string dev = env.Developer();
  NodeRef node = env.Node("fuzz");
  std::string job = env.Submit(dev, 50);
  REQUIRE(env.ClaimedJob(node) == job);
  std::vector<std::string> tokens = {dev, node.token, env.operator_token, env.Key("enroll"),
                                     "",  "glt_bogus"};
  std::mt19937_64 rng(1234);
  const auto& routes = core::Routes();
  int checked = 0;
  for (int i = 0; i < 3000; ++i) {
    const core::RouteInfo& route = routes[rng() % routes.size()];
    std::string path = route.pattern;
    auto fill = [&](const std::string& hole, const std::string& value) {
      size_t p = path.find(hole);
      if (p != std::string::npos) path.replace(p, hole.size(), value);
    };
    fill("{id}", rng() % 3 ? job : (rng() % 2 ? node.id : "%00../x"));
    fill("{step}", std::to_string(int64_t(rng() % 120) - 10));
    std::string method = rng() % 10 ? route.method : (rng() % 2 ? "DELETE" : "PATCH");
    std::string body = rng() % 8 ? DumpJson(RandomBody(rng)) : std::string(rng() % 64, '\x01');
    std::string query = rng() % 3 ? ""
                                  : "?limit=" + std::to_string(int64_t(rng() % 1000) - 10) +
                                        "&state=x&group_by=day&cursor=zz&from=1";
    env.Advance(double(rng() % 40));
    Resp r = env.Raw(method, path + query, tokens[rng() % tokens.size()], body);
    INFO(method << " " << path << query << " " << body << " -> " << r.status << " " << r.body);
    REQUIRE(r.status < 500);
    if (r.status >= 400) {
      REQUIRE(!r.ErrorCode().empty());
      ++checked;
    }
  }
  CHECK(checked > 1000);
}
