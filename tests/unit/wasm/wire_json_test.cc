#include "wasm/wire_json.h"

#include <catch2/catch.hpp>

using namespace gleaner;
using namespace gleaner::core;
using namespace gleaner::edge;

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
      R"({"method":"GET","path":"/","now_ms":1})",                   // no entropy
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
  Json j = ResponseToJson(r);
  CHECK(j["status"] == 409);
  CHECK(j["content_type"] == "application/json");
  CHECK(j["headers"] == Parse(R"([["retry-after","5"]])"));
  CHECK(Parse(j["body"].get<std::string>())["error"]["code"] == "conflict");

  HttpResponse b;
  b.body = std::string("ok\xc3", 3);  // truncated UTF-8
  Json jb = ResponseToJson(b);
  CHECK(jb.find("body") == jb.end());
  CHECK(jb["body_base64"] == Base64Encode(b.body));
}

TEST_CASE("batches and results cross the wire with their types", "[wire]") {
  Batch b;
  b.Add("UPDATE jobs SET x = ? WHERE id = ? AND y = ?", {SqlValue(int64_t(1) << 40), "j_1", 0.5});
  b.Add("SELECT 1", {SqlValue::Null()});
  Json j = BatchToJson(b);
  CHECK(
      DumpJson(j) ==
      R"({"statements":[{"params":[1099511627776,"j_1",0.5],"sql":"UPDATE jobs SET x = ? WHERE id = ? AND y = ?"},{"params":[null],"sql":"SELECT 1"}]})");

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

TEST_CASE("config JSON fills CoreConfig and is validated", "[wire]") {
  Result<CoreConfig> c = ConfigFromJson(Parse(
      R"({"blob_signing_key":"0123456789abcdef0123","heartbeat_interval_s":0.5,
          "public_url":"https://edge.example","keep_checkpoints":2})"));
  REQUIRE(c.ok());
  CHECK(c->heartbeat_interval_s == 0.5);
  CHECK(c->stall_after_s == 1.0);  // 2 x interval unless given
  CHECK(c->keep_checkpoints == 2);
  CHECK(c->public_url == "https://edge.example");
  CHECK(c->autoscale_max == CoreConfig().autoscale_max);

  CHECK_FALSE(ConfigFromJson(Parse(R"({})")).ok());  // no signing key
  CHECK_FALSE(ConfigFromJson(Parse(R"({"blob_signing_key":"short"})")).ok());
  CHECK_FALSE(
      ConfigFromJson(Parse(R"({"blob_signing_key":"0123456789abcdef0123","typo_s":1})")).ok());
  CHECK_FALSE(
      ConfigFromJson(
          Parse(R"({"blob_signing_key":"0123456789abcdef0123","heartbeat_interval_s":"x"})"))
          .ok());
}

TEST_CASE("integer parameters are inlined for D1, other values stay bound", "[wire]") {
  Batch b;
  b.Add("UPDATE jobs SET k = 'j' || ? , note = '?''?' WHERE id = ? AND e = ? -- ?\n AND f = ?",
        {int64_t(7), "j_1", int64_t(-3), 0.5});
  b.Add("SELECT /* ? */ \"a?\" FROM t WHERE x = ?2 AND y = ?1 AND z = ?2 AND w = ?",
        {int64_t(1), "s", 2.5});
  b.Add("SELECT ? AS big", {SqlValue(int64_t(INT64_MIN))});
  b.Add("SELECT ?, ?", {int64_t(1)});   // count mismatch: untouched
  b.Add("SELECT :name", {int64_t(1)});  // named: untouched
  Batch d1 = InlineIntegerParams(b);
  REQUIRE(d1.statements.size() == 5);
  CHECK(d1.statements[0].sql ==
        "UPDATE jobs SET k = 'j' || (7) , note = '?''?' WHERE id = ?1 AND e = (-3) -- ?\n AND f = "
        "?2");
  REQUIRE(d1.statements[0].params.size() == 2);
  CHECK(d1.statements[0].params[0].AsText() == "j_1");
  CHECK(d1.statements[0].params[1].AsReal() == 0.5);
  CHECK(d1.statements[1].sql ==
        "SELECT /* ? */ \"a?\" FROM t WHERE x = ?1 AND y = (1) AND z = ?1 AND w = ?2");
  REQUIRE(d1.statements[1].params.size() == 2);
  CHECK(d1.statements[1].params[0].AsText() == "s");
  CHECK(d1.statements[1].params[1].AsReal() == 2.5);
  CHECK(d1.statements[2].sql == "SELECT (-9223372036854775808) AS big");
  CHECK(d1.statements[3].sql == "SELECT ?, ?");
  CHECK(d1.statements[4].sql == "SELECT :name");
}
