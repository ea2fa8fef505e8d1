#include "wasm/edge_session.h"

#include <catch2/catch.hpp>
#include <map>

#include "coordinator/core/migrations.h"
#include "coordinator/core/settings.h"
#include "coordinator/native/db/sqlite_executor.h"
#include "tests/unit/wasm/shell_side.h"
#include "wasm/wire_json.h"

using namespace gleaner;
using namespace gleaner::core;
using namespace gleaner::edge;
using namespace gleaner::edge::testing;

namespace {

const char kConfig[] = R"({"blob-signing-key":"0123456789abcdef0123456789abcdef"})";

Json Parse(const std::string& text) {
  Result<Json> j = ParseJson(text);
  REQUIRE(j.ok());
  return *j;
}

// Plays the Worker: keeps the statement texts by id, binds parameters as D1 does (numbers,
// strings, nulls as they come; integers arrive as strings), runs each batch on SQLite and feeds
// the JSON result back.
Json DriveJson(EdgeSession& session, native::SqliteExecutor& db, const std::string& first) {
  static std::map<EdgeSession*, std::map<int64_t, std::string>> texts;
  std::map<int64_t, std::string>& sql = texts[&session];
  Json step = Parse(first);
  int guard = 0;
  while (!step["done"].get<bool>()) {
    REQUIRE(++guard < 50);
    Batch batch;
    for (const Json& s : step["batch"]) {
      std::vector<SqlValue> params;
      for (const Json& p : s["params"]) {
        if (p.is_null())
          params.push_back(SqlValue::Null());
        else if (p.is_number())
          params.push_back(SqlValue(p.get<double>()));  // D1 binds every number as REAL
        else
          params.push_back(SqlValue(p.get<std::string>()));
      }
      int64_t id = s["id"].get<int64_t>();
      if (s.contains("sql") && id >= 0) sql[id] = s["sql"].get<std::string>();
      REQUIRE((s.contains("sql") || sql.count(id)));
      batch.Add(s.contains("sql") ? s["sql"].get<std::string>() : sql[id], std::move(params));
    }
    std::string result = DumpJson(BatchResultToJson(db.Execute(batch)));
    step = Parse(session.Continue(step["handle"].get<int64_t>(), result));
  }
  return step;
}

std::unique_ptr<native::SqliteExecutor> Memory() {
  auto db = native::SqliteExecutor::Open({":memory:"});
  REQUIRE(db.ok());
  return std::move(db).value();
}

}  // namespace

TEST_CASE("a session refuses work before init and rejects a bad config", "[session]") {
  EdgeSession s;
  Json step = Parse(s.Start(R"({"op":"migrate"})"));
  CHECK(step["done"] == true);
  CHECK(step["response"]["status"] == 503);
  CHECK(s.Init("{").find("config") == 0);
  CHECK_FALSE(s.Init(R"({"blob-signing-key":"short"})").empty());
  CHECK_FALSE(s.ready());
  CHECK(s.Init(kConfig).empty());
  CHECK(s.ready());
}

TEST_CASE("the settings table goes to the Worker with the values in force", "[session]") {
  EdgeSession s;
  Json before = Parse(s.Settings());
  REQUIRE(before.is_array());
  REQUIRE(before.size() == core::CoreSettings().size());
  CHECK_FALSE(before[0].contains("value"));
  REQUIRE(s.Init(R"({"blob-signing-key":"0123456789abcdef0123456789abcdef","max-body":"4096"})")
              .empty());
  Json after = Parse(s.Settings());
  bool found = false;
  for (const Json& e : after) {
    if (e["name"] != "max-body") continue;
    found = true;
    CHECK(e["env"] == "GLEANER_MAX_BODY");
    CHECK(e["kind"] == "integer");
    CHECK(e["default"] == "1048576");
    CHECK(e["value"] == "4096");
  }
  CHECK(found);
}

TEST_CASE("migrations, bootstrap and requests run through the JSON wire", "[session]") {
  auto db = Memory();
  EdgeSession s;
  REQUIRE(s.Init(kConfig).empty());
  Json m = DriveJson(s, *db, s.Start(R"({"op":"migrate"})"));
  CHECK(m["response"]["status"] == 200);
  CHECK(Parse(m["response"]["body"].get<std::string>())["applied"] == Migrations().size());
  Json again = DriveJson(s, *db, s.Start(R"({"op":"migrate"})"));
  CHECK(again["response"]["body"] == R"({"applied":0})");

  Json boot = DriveJson(s, *db, s.Start(R"({"op":"bootstrap","token":"tok","now_ms":5})"));
  CHECK(boot["response"]["status"] == 200);
  Batch count;
  count.Add("SELECT COUNT(*) AS n FROM api_keys WHERE role = 'operator'");
  CHECK(db->Execute(count).results[0].Get(0, "n").AsInt() == 1);

  Json health = DriveJson(s, *db,
                          s.Start(DumpJson({{"op", "request"},
                                            {"request",
                                             {{"method", "GET"},
                                              {"path", "/healthz"},
                                              {"now_ms", 1},
                                              {"entropy", std::string(64, '0')}}}})));
  CHECK(health["response"]["status"] == 200);
  CHECK(s.open_plans() == 0);
  // The path is percent-decoded by the core's rule: an escaped letter routes like the letter,
  // a malformed escape is the core's 400, a byte that is not UTF-8 is just a byte (404 here).
  auto get = [&](const std::string& path) {
    return DriveJson(s, *db,
                     s.Start(DumpJson({{"op", "request"},
                                       {"request",
                                        {{"method", "GET"},
                                         {"path", path},
                                         {"now_ms", 1},
                                         {"entropy", std::string(64, '0')}}}})))["response"];
  };
  CHECK(get("/heal%74hz")["status"] == 200);
  Json malformed = get("/v1/jobs/%zz");
  CHECK(malformed["status"] == 400);
  CHECK(Parse(malformed["body"].get<std::string>())["error"]["code"] == "bad_request");
  CHECK(get("/v1/jobs/%FF")["status"] == 401);  // no token: the path decoded fine
  CHECK(get("nope")["status"] == 400);
  CHECK(s.open_plans() == 0);
  // Without entropy in the request, the session's is used; with neither, the answer is 500.
  const std::string post = R"({"op":"request","request":{"method":"POST","path":"/v1/jobs",)"
                           R"("now_ms":1,"headers":[["authorization","Bearer tok"]],"body":"{}"}})";
  CHECK(DriveJson(s, *db, s.Start(post, std::string(32, 'e')))["response"]["status"] == 400);
  CHECK(Parse(s.Start(post))["response"]["status"] == 500);

  Json stored = DriveJson(
      s, *db,
      s.Start(R"({"op":"blob_stored","key":"jobs/j/ckpt","size":3,"sha256":"ab","now_ms":9})"));
  CHECK(stored["response"]["status"] == 204);
  Json tick = DriveJson(s, *db, s.Start(R"({"op":"maintenance","now_ms":9})"));
  CHECK(tick["response"]["status"] == 200);
}

TEST_CASE("bad ops, handles and results answer errors and leak no plans", "[session]") {
  auto db = Memory();
  EdgeSession s;
  REQUIRE(s.Init(kConfig).empty());
  for (const char* op : {"nope", "{\"op\":\"dance\"}", "{\"op\":\"request\"}",
                         "{\"op\":\"request\",\"request\":{\"method\":\"GET\"}}",
                         "{\"op\":\"bootstrap\",\"now_ms\":1}", "{\"op\":\"maintenance\"}"}) {
    INFO(op);
    Json step = Parse(s.Start(op));
    CHECK(step["done"] == true);
    CHECK(step["response"]["status"] == 500);
  }
  CHECK(Parse(s.Continue(12345, "{}"))["response"]["status"] == 500);

  // A plan whose batch failed (or whose result is garbage) still finishes with an error.
  Json step = Parse(s.Start(R"({"op":"migrate"})"));
  REQUIRE(step["done"] == false);
  Json failed = Parse(s.Continue(step["handle"].get<int64_t>(), "not json"));
  CHECK(failed["done"] == true);
  CHECK(failed["response"]["status"] == 500);

  step = Parse(s.Start(R"({"op":"migrate"})"));
  Json wrong = Parse(s.Continue(step["handle"].get<int64_t>(), R"({"results":[]})"));
  CHECK(wrong["response"]["status"] == 500);

  step = Parse(s.Start(R"({"op":"migrate"})"));
  CHECK(s.open_plans() == 1);
  CHECK_FALSE(s.Init(kConfig).empty());  // no reconfiguration under an open plan
  s.Drop(step["handle"].get<int64_t>());
  CHECK(s.Init(kConfig).empty());
  CHECK(s.open_plans() == 0);

  Json auth = Parse(s.AuthorizeBlob(R"({"method":"GET","path":"/blobs/x","query":"","now_ms":1})"));
  CHECK(auth["ok"] == false);
  CHECK(auth["response"]["status"].get<int>() >= 400);
  // The path comes percent-encoded and is decoded here, as the native shell decodes it.
  Json bad =
      Parse(s.AuthorizeBlob(R"({"method":"GET","path":"/blobs/%zz","query":"","now_ms":1})"));
  CHECK(bad["ok"] == false);
  CHECK(bad["response"]["status"] == 400);
  CHECK(Parse(bad["response"]["body"].get<std::string>())["error"]["code"] == "bad_request");
  CHECK(Parse(s.AuthorizeBlob("[]"))["response"]["status"] == 500);
}
