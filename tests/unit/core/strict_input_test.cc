// Input that a lenient reader resolves silently is refused: duplicate JSON keys, unknown fields,
// NUL in strings. Output that another program would misread is neutralised: CSV cells that a
// spreadsheet runs as formulas. Developers do not see the operator's prices.
#include <fstream>
#include <sstream>

#include "coordinator/core/report_util.h"
#include "tests/unit/core/test_env.h"

using namespace gleaner;
using namespace gleaner::testing;

TEST_CASE("strict JSON: duplicate keys and NUL are 400 on every JSON route", "[strict]") {
  TestEnv env;
  const std::string dev = env.Developer();
  const std::string job = R"({"kind":"synthetic","params":{"steps":10},)";
  struct Case {
    const char* what;
    std::string body;
    const char* says;
  };
  for (const Case& c : {
           Case{"top-level duplicate", job + R"("priority":1,"priority":9})", "duplicate key"},
           Case{"nested duplicate", R"({"kind":"synthetic","params":{"steps":10,"steps":20}})",
                "duplicate key"},
           Case{"NUL in a value", job + R"("idempotency_key":"a\u0000b"})", "NUL"},
           Case{"NUL in a key", job + R"("a\u0000b":1})", "NUL"},
       }) {
    INFO(c.what);
    Resp r = env.Raw("POST", "/v1/jobs", dev, c.body, {{"content-type", "application/json"}});
    CHECK(r.status == 400);
    CHECK(r.json["error"]["message"].get<std::string>().find(c.says) != std::string::npos);
  }
  // A raw NUL byte ends nlohmann's input: what follows it must not be ignored.
  const std::string valid = R"({"kind":"synthetic","params":{"steps":10}})";
  for (const std::string& body : {valid + std::string("\0garbage", 8), valid + std::string("\0", 1),
                                  std::string(R"({"kind":"synthetic",)") + std::string("\0", 1) +
                                      R"("params":{"steps":10}})"}) {
    Resp r = env.Raw("POST", "/v1/jobs", dev, body, {{"content-type", "application/json"}});
    CHECK(r.status == 400);
    CHECK(r.json["error"]["message"].get<std::string>().find("NUL byte") != std::string::npos);
  }
  CHECK(env.Raw("POST", "/v1/jobs", dev, valid + "garbage", {{"content-type", "application/json"}})
            .status == 400);
  CHECK(!ParseJson(valid + std::string("\0garbage", 8)).ok());
  CHECK(!ParseStrictJson(valid + std::string("\0", 1)).ok());
  CHECK(
      ParseJson(R"({"a":"\u0000"})").ok());  // an escaped NUL is JSON (ParseStrictJson refuses it)
  CHECK(env.Scalar("SELECT count(*) FROM jobs") == 0);
  Resp nul = env.Post("/v1/nodes/register", env.Key("enroll"),
                      {{"machine_id", std::string("pc\0x", 4)},
                       {"gpu", {{"name", "RTX 4090"}, {"vram_mb", 24000}}},
                       {"agent_version", "0.1.0"}});
  CHECK(nul.status == 400);
  CHECK(env.Scalar("SELECT count(*) FROM nodes") == 0);
}

TEST_CASE("strict JSON: unknown fields are 400 on register and the lease routes", "[strict]") {
  TestEnv env;
  const std::string enroll = env.Key("enroll");
  Json reg = {{"machine_id", "pc"},
              {"gpu", {{"name", "RTX 4090"}, {"vram_mb", 24000}}},
              {"agent_version", "0.1.0"}};
  Json extra = reg;
  extra["is_admin"] = true;
  CHECK(env.Post("/v1/nodes/register", enroll, extra).status == 400);
  extra = reg;
  extra["gpu"]["count"] = 8;
  CHECK(env.Post("/v1/nodes/register", enroll, extra).status == 400);
  CHECK(env.Scalar("SELECT count(*) FROM nodes") == 0);
  const std::string dev = env.Developer();
  const std::string job = env.Submit(dev, 10);
  NodeRef node = env.Node("holder");
  CHECK(env.Post("/v1/work", node.token, {{"gpu_free_mb", 1}}).status == 400);
  REQUIRE(env.ClaimedJob(node) == job);
  const std::string base = "/v1/jobs/" + job;
  Resp hb = env.Post(base + "/heartbeat", node.token, {{"epoch", 1}, {"step", 10}, {"stpe", 3}});
  CHECK(hb.status == 400);
  CHECK(hb.json["error"]["message"] == "stpe is not a known field");
  CHECK(env.Scalar("SELECT step_done FROM jobs WHERE id = ?", {job}) == 0);
  CHECK(env.Post(base + "/checkpoints", node.token, {{"epoch", 1}, {"step", 5}, {"x", 1}}).status ==
        400);
  CHECK(env.Post(base + "/outputs", node.token, {{"epoch", 1}, {"name", "a"}, {"x", 1}}).status ==
        400);
  CHECK(env.Post(base + "/release", node.token, {{"epoch", 1}, {"x", 1}}).status == 400);
  CHECK(env.Post(base + "/fail", node.token, {{"epoch", 1}, {"x", 1}}).status == 400);
  CHECK(env.JobState(job) == "running");
}

TEST_CASE("CSV: text cells that a spreadsheet would run as formulas are quoted with '",
          "[strict]") {
  CHECK(core::CsvField("RTX 4090") == "RTX 4090");
  CHECK(core::CsvField("=HYPERLINK(\"x\")") == "\"'=HYPERLINK(\"\"x\"\")\"");
  CHECK(core::CsvField("+1") == "'+1");
  CHECK(core::CsvField("-1") == "'-1");
  CHECK(core::CsvField("@SUM(A1)") == "'@SUM(A1)");
  CHECK(core::CsvField("\tx") == "'\tx");
  // The table the dashboard's exports are tested against too (one rule: csv.js, csvCell).
  std::ifstream f(std::string(GLEANER_SOURCE_DIR) + "/tests/unit/core/csv_cells.json");
  std::stringstream text;
  text << f.rdbuf();
  Result<Json> cells = ParseJson(text.str());
  REQUIRE(cells.ok());
  REQUIRE(cells->value("text", Json::array()).size() > 10);
  for (const Json& c : (*cells)["text"]) {
    INFO(DumpJson(c));
    CHECK(core::CsvField(c[0].get<std::string>()) == c[1].get<std::string>());
  }
  for (const Json& c : (*cells)["numbers"]) {
    INFO(DumpJson(c));
    CHECK(core::Num(c[0].get<double>()) == c[1].get<std::string>());
  }
  // End to end: a node names its GPU; the operator's cost report by GPU is safe to open.
  TestEnv env;
  const std::string dev = env.Developer();
  const std::string job = env.Submit(dev, 10);
  NodeRef node = env.Node("pc", 24000, "=1+2");
  REQUIRE(env.ClaimedJob(node) == job);
  env.Advance(30);
  REQUIRE(env.Heartbeat(node, job, 1, 3).status == 200);
  Resp csv = env.Get("/v1/reports/cost?group_by=gpu&format=csv", env.operator_token);
  REQUIRE(csv.status == 200);
  CHECK(csv.body.find("\n'=1+2,") != std::string::npos);
  CHECK(csv.body.find("\n=1+2") == std::string::npos);
}

TEST_CASE("job events: a developer sees costs but not the operator's price per hour", "[strict]") {
  TestEnv env;
  const std::string dev = env.Developer();
  const std::string job = env.Submit(dev, 10);
  NodeRef node = env.Node("pc");
  REQUIRE(env.ClaimedJob(node) == job);
  env.Advance(30);
  REQUIRE(env.Heartbeat(node, job, 1, 3).status == 200);
  Resp mine = env.Get("/v1/jobs/" + job + "/events", dev);
  REQUIRE(mine.status == 200);
  REQUIRE(mine.json["segments"].size() == 1);
  CHECK(!mine.json["segments"][0].contains("usd_per_hour"));
  CHECK(mine.json["segments"][0].contains("cost_usd"));
  Resp op = env.Get("/v1/jobs/" + job + "/events", env.operator_token);
  REQUIRE(op.status == 200);
  CHECK(op.json["segments"][0]["usd_per_hour"].get<double>() == Approx(0.324));
}
