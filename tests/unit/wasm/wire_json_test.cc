#include "wasm/wire_json.h"

#include <catch2/catch.hpp>

#include "coordinator/native/db/sqlite_executor.h"
#include "tests/unit/wasm/shell_side.h"

using namespace gleaner;
using namespace gleaner::core;
using namespace gleaner::edge;
using namespace gleaner::edge::testing;

namespace {
Json Parse(const std::string& text) {
  Result<Json> j = ParseJson(text);
  REQUIRE(j.ok());
  return *j;
}
const std::string kEntropy(64, 'a');
}  // namespace

TEST_CASE("base64 round-trips every length and rejects bad text", "[wire]") {
  std::string bytes;
  for (int i = 0; i < 300; ++i) {
    std::string back;
    REQUIRE(Base64Decode(Base64Encode(bytes), &back));
    CHECK(back == bytes);
    bytes += char(i * 37);
  }
  CHECK(Base64Encode("foobar") == "Zm9vYmFy");
  CHECK(Base64Encode("fo") == "Zm8=");
  std::string out;
  CHECK_FALSE(Base64Decode("Zm8", &out));       // not a multiple of 4
  CHECK_FALSE(Base64Decode("Zm=8", &out));      // data after padding
  CHECK_FALSE(Base64Decode("Z!8=", &out));      // alphabet
  CHECK_FALSE(Base64Decode("Zg==Zg==", &out));  // padding in the middle
}

TEST_CASE("requests parse from the shell's JSON", "[wire]") {
  Json j = Parse(R"({"method":"POST","path":"/v1/jobs","query":"a=1",
    "headers":[["Authorization","Bearer x"],["content-type","application/json"]],
    "body":"{\"kind\":\"synthetic\"}","now_ms":1700000000000,"entropy":")" +
                 kEntropy + R"("})");
  Result<HttpRequest> r = RequestFromJson(j);
  REQUIRE(r.ok());
  CHECK(r->method == "POST");
  CHECK(r->query == "a=1");
  CHECK(r->Header("authorization") == "Bearer x");
  CHECK(r->body == "{\"kind\":\"synthetic\"}");
  CHECK(r->now_ms == 1700000000000);
  CHECK(r->entropy.size() == 32);

  // Binary bodies arrive base64-encoded and survive a round trip.
  HttpRequest bin = *r;
  bin.body = std::string("\x00\xff\xfe", 3);
  Result<HttpRequest> back = RequestFromJson(RequestToJson(bin));
  REQUIRE(back.ok());
  CHECK(back->body == bin.body);
}

TEST_CASE("bad request JSON is an error, not a crash", "[wire]") {
  const char* bad[] = {
      R"([])",
      R"({"method":"GET","path":"/","now_ms":1,"entropy":"abcd"})",  // too little
      R"({"method":"GET","path":"/","now_ms":-1,"entropy":"%E"})",
      R"({"method":"GET","path":"/","now_ms":1,"entropy":"%E","headers":{"a":"b"}})",
      R"({"method":"GET","path":"/","now_ms":1,"entropy":"%E","headers":[["a",1]]})",
      R"({"method":"GET","path":"/","now_ms":1,"entropy":"%E","body_base64":"!!!!"})",
      R"({"method":"GET","path":"/","now_ms":1,"entropy":"%E","surprise":1})",
  };
  for (const char* text : bad) {
    std::string s = text;
    size_t at = s.find("%E");
    if (at != std::string::npos) s.replace(at, 2, kEntropy);
    INFO(s);
    CHECK_FALSE(RequestFromJson(Parse(s)).ok());
  }
}

TEST_CASE("responses carry text as body and bytes as body_base64", "[wire]") {
  HttpResponse r = HttpResponse::Error(Status::Conflict("lease lost"));
  r.headers.emplace_back("retry-after", "5");
  std::string text;
  AppendResponseJson(&text, r);
  Json j = Parse(text);
  CHECK(j["status"] == 409);
  CHECK(j["content_type"] == "application/json");
  CHECK(j["headers"] == Parse(R"([["retry-after","5"]])"));
  CHECK(Parse(j["body"].get<std::string>())["error"]["code"] == "conflict");

  HttpResponse b;
  b.body = std::string("ok\xc3", 3);  // truncated UTF-8
  std::string btext;
  AppendResponseJson(&btext, b);
  Json jb = Parse(btext);
  CHECK(jb.find("body") == jb.end());
  CHECK(jb["body_base64"] == Base64Encode(b.body));
}

TEST_CASE("JSON strings escape what JSON needs and keep everything else", "[wire]") {
  std::string text;
  std::string raw = std::string("q\"b\\n\n\r\t\x01\x1f \xc3\xa9 ?", 15);
  AppendJsonString(&text, raw);
  CHECK(text == "\"q\\\"b\\\\n\\n\\r\\t\\u0001\\u001f \xc3\xa9 ?\"");
  CHECK(Parse(text).get<std::string>() == raw);
  std::string values;
  for (const SqlValue& v :
       {SqlValue(int64_t(-5)), SqlValue(0.1), SqlValue::Null(), SqlValue("x")}) {
    AppendSqlValueJson(&values, v);
    values += ",";
  }
  CHECK(values == "-5,0.1,null,\"x\",");
}

TEST_CASE("statements go out by id, with their D1 text only the first time", "[wire]") {
  D1Statements ids;
  Statement s{"UPDATE jobs SET x = ? WHERE id = ? AND y = ?", {int64_t(1) << 40, "j_1", 0.5}};
  std::string first, second, other;
  ids.AppendJson(s, &first);
  CHECK(first ==
        R"({"id":0,"sql":"UPDATE jobs SET x = CAST(?1 AS INTEGER) WHERE id = ?2 AND y = ?3",)"
        R"("params":["1099511627776","j_1",0.5]})");
  s.params = {int64_t(-7), "j_2", 2.0};
  ids.AppendJson(s, &second);
  CHECK(second == R"({"id":0,"params":["-7","j_2",2.0]})");
  // The same text with other parameter types is another D1 statement.
  s.params = {SqlValue::Null(), "j_2", 2.0};
  ids.AppendJson(s, &other);
  CHECK(other == R"({"id":1,"sql":"UPDATE jobs SET x = ?1 WHERE id = ?2 AND y = ?3",)"
                 R"("params":[null,"j_2",2.0]})");
  CHECK(ids.size() == 2);

  // Past the bound, texts travel every time.
  D1Statements small(1);
  std::string a, b, c;
  small.AppendJson({"SELECT 1", {}}, &a);
  small.AppendJson({"SELECT 2", {}}, &b);
  small.AppendJson({"SELECT 2", {}}, &c);
  CHECK(a == R"({"id":0,"sql":"SELECT 1","params":[]})");
  CHECK(b == R"({"id":-1,"sql":"SELECT 2","params":[]})");
  CHECK(c == b);
}

TEST_CASE("results cross the wire with their types", "[wire]") {
  BatchResult r = BatchResultFromJson(Parse(
      R"({"results":[{"columns":[],"rows":[]},{"columns":["id","n","f","z"],"rows":[["a",3,2.5,null]]}]})"));
  REQUIRE(r.status.ok());
  REQUIRE(r.results.size() == 2);
  CHECK(r.results[1].Get(0, "id").AsText() == "a");
  CHECK(r.results[1].Get(0, "n").type() == SqlValue::Type::kInt);
  CHECK(r.results[1].Get(0, "f").AsReal() == 2.5);
  CHECK(r.results[1].Get(0, "z").is_null());
  BatchResult back = BatchResultFromJson(BatchResultToJson(r));
  REQUIRE(back.results.size() == 2);
  CHECK(DumpJson(BatchResultToJson(back)) == DumpJson(BatchResultToJson(r)));
}

TEST_CASE("shell errors map onto the executor contract", "[wire]") {
  CHECK(BatchResultFromJson(Parse(R"({"error":{"code":"conflict","message":"UNIQUE"}})"))
            .status.code() == Code::kConflict);
  CHECK(BatchResultFromJson(Parse(R"({"error":{"code":"unavailable"}})")).status.code() ==
        Code::kUnavailable);
  CHECK(BatchResultFromJson(Parse(R"({"error":{"code":"weird","message":"x"}})")).status.code() ==
        Code::kInternal);
  const char* malformed[] = {R"(3)",
                             R"({})",
                             R"({"results":{}})",
                             R"({"results":[{"columns":["a"],"rows":[[1,2]]}]})",
                             R"({"results":[{"columns":["a"],"rows":[[[1]]]}]})",
                             R"({"error":{"message":"no code"}})"};
  for (const char* text : malformed) {
    INFO(text);
    CHECK(BatchResultFromJson(Parse(text)).status.code() == Code::kInternal);
  }
}

TEST_CASE("config JSON uses the settings table's names and syntax and is validated", "[wire]") {
  Result<CoreConfig> c = ConfigFromJson(Parse(
      R"({"blob-signing-key":"0123456789abcdef0123","heartbeat-interval":0.5,
          "public-url":"https://edge.example/","keep-checkpoints":2,"max-nodes":"7",
          "node-rate-limit":"off","s3-virtual-hosted":true,"max-pending-uploads":4})"));
  INFO(c.status().ToString());
  REQUIRE(c.ok());
  CHECK(c->heartbeat_interval_s == 0.5);
  CHECK(c->stall_after_s == 1.0);  // 2 x interval unless given
  CHECK(c->keep_checkpoints == 2);
  CHECK(c->autoscale_max == 7);  // a string in the flag syntax works as well as a number
  CHECK(c->public_url == "https://edge.example");
  CHECK_FALSE(c->node_rate.limited());
  CHECK_FALSE(c->s3.path_style);
  CHECK(c->max_pending_uploads == 4);
  CHECK(c->autoscale_min == CoreConfig().autoscale_min);

  const std::string key = R"("blob-signing-key":"0123456789abcdef0123")";
  struct Bad {
    std::string json, expect;
  };
  for (const Bad& bad : std::vector<Bad>{
           {"{}", "signing key"},
           {R"({"blob-signing-key":"short"})", "signing key"},
           {"{" + key + R"(,"typo":1})", "config.typo: unknown setting"},
           {"{" + key + R"(,"heartbeat_interval_s":1})", "config.heartbeat_interval_s: unknown"},
           {"{" + key + R"(,"heartbeat-interval":"x"})", "config.heartbeat-interval: expected"},
           {"{" + key + R"(,"keep-checkpoints":0})",
            "config.keep-checkpoints: must be in [1, 100]"},
           {"{" + key + R"(,"max-nodes":1.5})",
            "config.max-nodes: expected a non-negative integer"},
           {"{" + key + R"(,"max-nodes":[1]})", "config.max-nodes: expected a string"},
           {"{" + key + R"(,"blob-signing-key":1})", "config.blob-signing-key: expected a string"},
       }) {
    Result<CoreConfig> r = ConfigFromJson(Parse(bad.json));
    INFO(bad.json << " -> " << r.status().ToString());
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message().find(bad.expect) != std::string::npos);
  }
}

TEST_CASE("integers are bound as text under CAST for D1, so the SQL text never varies", "[wire]") {
  Batch b;
  b.Add("UPDATE jobs SET k = 'j' || ? , note = '?''?' WHERE id = ? AND e = ? -- ?\n AND f = ?",
        {int64_t(7), "j_1", int64_t(-3), 0.5});
  b.Add("SELECT /* ? */ \"a?\" FROM t WHERE x = ?2 AND y = ?1 AND z = ?2 AND w = ?",
        {int64_t(1), "s", 2.5});
  b.Add("SELECT ? AS big", {SqlValue(int64_t(INT64_MIN))});
  b.Add("SELECT ?, ?", {int64_t(1)});   // count mismatch: untouched
  b.Add("SELECT :name", {int64_t(1)});  // named: untouched
  Batch d1 = ForD1(b);
  REQUIRE(d1.statements.size() == 5);
  CHECK(d1.statements[0].sql ==
        "UPDATE jobs SET k = 'j' || CAST(?1 AS INTEGER) , note = '?''?' WHERE id = ?2 AND e = "
        "CAST(?3 AS INTEGER) -- ?\n AND f = ?4");
  REQUIRE(d1.statements[0].params.size() == 4);
  CHECK(d1.statements[0].params[0].AsText() == "7");
  CHECK(d1.statements[0].params[1].AsText() == "j_1");
  CHECK(d1.statements[0].params[2].AsText() == "-3");
  CHECK(d1.statements[0].params[3].AsReal() == 0.5);
  CHECK(d1.statements[1].sql ==
        "SELECT /* ? */ \"a?\" FROM t WHERE x = ?2 AND y = CAST(?1 AS INTEGER) AND z = ?2 AND w = "
        "?3");
  CHECK(d1.statements[2].sql == "SELECT CAST(?1 AS INTEGER) AS big");
  CHECK(d1.statements[2].params[0].AsText() == "-9223372036854775808");
  CHECK(d1.statements[3].sql == "SELECT ?, ?");
  CHECK(d1.statements[3].params[0].type() == SqlValue::Type::kInt);
  CHECK(d1.statements[4].sql == "SELECT :name");

  // Other values of the same types give the same text: one cached statement per call site.
  Batch other;
  other.Add(b.statements[0].sql, {int64_t(123456789012345), "j_2", int64_t(0), 7.25});
  CHECK(ForD1(other).statements[0].sql == d1.statements[0].sql);
}

TEST_CASE("the D1 form keeps every int64 exact and means the same on SQLite", "[wire]") {
  auto opened = native::SqliteExecutor::Open({":memory:"});
  REQUIRE(opened.ok());
  native::SqliteExecutor& db = **opened;
  const int64_t values[] = {
      0, 1, -1, (int64_t(1) << 53) + 1, -(int64_t(1) << 53) - 1, INT64_MAX, INT64_MIN};
  for (int64_t v : values) {
    INFO(v);
    Batch b;
    b.Add("CREATE TABLE IF NOT EXISTS t (v INTEGER, s TEXT)");
    b.Add("DELETE FROM t");
    b.Add("INSERT INTO t (v, s) VALUES (?, 'e' || ?)", {v, v});
    b.Add(
        "SELECT v, CAST(v AS TEXT) AS text, typeof(v) AS type, s, MAX(v, ?) AS mx, ? / 2 AS half, "
        "typeof(?) AS ptype FROM t",
        {v, v, v});
    core::BatchResult r = db.Execute(ForD1(b));
    REQUIRE(r.status.ok());
    const Rows& rows = r.results[3];
    CHECK(rows.Get(0, "v").AsInt() == v);
    CHECK(rows.Get(0, "text").AsText() == std::to_string(v));
    CHECK(rows.Get(0, "type").AsText() == "integer");
    CHECK(rows.Get(0, "s").AsText() == "e" + std::to_string(v));
    CHECK(rows.Get(0, "mx").AsInt() == v);
    CHECK(rows.Get(0, "half").AsInt() == v / 2);
    CHECK(rows.Get(0, "ptype").AsText() == "integer");
  }
}
