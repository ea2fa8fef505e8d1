// The blob transfer policy both shells ask (coordinator/core/blob_policy.h): admission, the
// upload checks, the minimum rate, the read shape, and the one error table.
#include "coordinator/core/blob_policy.h"

#include <catch2/catch.hpp>
#include <set>

using namespace gleaner;
using namespace gleaner::core;

namespace {

std::string ErrorCode(const HttpResponse& r) {
  Result<Json> j = ParseJson(r.body);
  REQUIRE(j.ok());
  return (*j)["error"]["code"].get<std::string>();
}

}  // namespace

TEST_CASE("blob refusals come from one table, each with its own name", "[blob_policy]") {
  std::set<std::string> names;
  for (const BlobRefusalRow& row : BlobRefusalTable()) {
    INFO(row.name);
    CHECK(names.insert(row.name).second);
    HttpResponse r = BlobRefusalResponse(row.refusal);
    CHECK(r.status == row.status);
    CHECK(ErrorCode(r) == row.code);
    bool retry = false;
    for (const auto& [k, v] : r.headers) retry = retry || k == "Retry-After";
    CHECK(retry == (row.status == 503));
  }
  CHECK(BlobRefusalResponse(BlobRefusal::kTooSlow).status == 408);
}

TEST_CASE("admission: one upload per key, bounded reads per key and in all", "[blob_policy]") {
  BlobAdmissionTable t({3, 2});
  CHECK_FALSE(t.Admit("a", true));
  std::optional<HttpResponse> again = t.Admit("a", true);
  REQUIRE(again);
  CHECK(again->status == 503);
  CHECK(again->body.find("in progress") != std::string::npos);
  CHECK_FALSE(t.Admit("b", false));
  CHECK_FALSE(t.Admit("b", false));
  std::optional<HttpResponse> third = t.Admit("b", false);  // per key
  REQUIRE(third);
  CHECK(third->body.find("this object") != std::string::npos);
  CHECK(t.active() == 3);
  std::optional<HttpResponse> full = t.Admit("c", false);  // in all
  REQUIRE(full);
  CHECK(full->body.find("blob transfers at once") != std::string::npos);
  t.Release("a", true);
  CHECK_FALSE(t.Admit("a", true));  // a released upload slot is free at once
  t.Release("a", true);
  t.Release("b", false);
  t.Release("b", false);
  CHECK(t.active() == 0);
}

TEST_CASE("uploads: declared length, the URL's limit and sha256", "[blob_policy]") {
  BlobGrant g{"k", "PUT", 100, std::string(64, 'a')};
  CHECK_FALSE(CheckPutHead(g, 100, true));
  CHECK_FALSE(CheckPutHead(g, -1, false));  // chunked: checked while it streams
  std::optional<HttpResponse> none = CheckPutHead(g, -1, true);
  REQUIRE(none);
  CHECK(none->status == 411);
  std::optional<HttpResponse> big = CheckPutHead(g, 101, false);
  REQUIRE(big);
  CHECK(big->status == 413);
  CHECK(big->body.find("limit of 100 bytes") != std::string::npos);
  CHECK(OverPutLimit(g, 101));
  CHECK_FALSE(OverPutLimit(g, 100));
  CHECK_FALSE(CheckPutBody(g, 100, std::string(64, 'a')));
  std::optional<HttpResponse> wrong = CheckPutBody(g, 100, std::string(64, 'b'));
  REQUIRE(wrong);
  CHECK(wrong->status == 400);
  CHECK(wrong->body.find("sha256 mismatch") != std::string::npos);
  g.sha256.clear();
  CHECK_FALSE(CheckPutBody(g, 5, "anything"));
}

TEST_CASE("the minimum rate: grace plus bytes over the rate", "[blob_policy]") {
  BlobRateLimit r{1000, 500};
  CHECK(BlobTransferBudgetMs(r, 0, 0) == 500);
  CHECK(BlobTransferBudgetMs(r, 400, 0) == 100);
  CHECK(BlobTransferBudgetMs(r, 510, 10) == 0);      // exactly due: too slow
  CHECK(BlobTransferBudgetMs(r, 600, 1000) == 900);  // 1000 bytes bought a second
  CHECK(BlobTransferBudgetMs(r, 0, 0, 2000) == 2500);
  HttpResponse slow = TooSlowResponse(r);
  CHECK(slow.status == 408);
  CHECK(slow.body.find("1000 bytes per second") != std::string::npos);
}

TEST_CASE("reads: whole object, one range, or 416 with the size", "[blob_policy]") {
  BlobRead whole = DecideBlobRead(nullptr, 10);
  CHECK(whole.status == 200);
  CHECK(whole.length == 10);
  const std::string one = "bytes=2-4", many = "bytes=0-1,3-4", past = "bytes=20-",
                    odd = "items=1-2";
  BlobRead part = DecideBlobRead(&one, 10);
  CHECK(part.status == 206);
  CHECK(part.first == 2);
  CHECK(part.length == 3);
  bool content_range = false;
  for (const auto& [k, v] : part.headers) content_range = content_range || v == "bytes 2-4/10";
  CHECK(content_range);
  for (const std::string* refused : {&many, &past}) {
    BlobRead r = DecideBlobRead(refused, 10);
    REQUIRE(r.refusal);
    CHECK(r.refusal->status == 416);
    CHECK(r.refusal->headers.back().second == "bytes */10");
  }
  CHECK(DecideBlobRead(&odd, 10).status == 200);  // another unit: ignored
}

TEST_CASE("Range values (RFC 9110 §14.1.2)", "[blob_policy]") {
  struct Case {
    const char* value;
    int64_t size;
    RangeResult result;
    int64_t first, last;
  };
  using R = RangeResult;
  const Case cases[] = {
      {"bytes=0-99", 1000, R::kSatisfiable, 0, 99},
      {"bytes=5-5", 10, R::kSatisfiable, 5, 5},
      {"bytes=5-", 10, R::kSatisfiable, 5, 9},
      {"bytes=5-100", 10, R::kSatisfiable, 5, 9},
      {"bytes=-3", 10, R::kSatisfiable, 7, 9},
      {"bytes=-30", 10, R::kSatisfiable, 0, 9},
      {"bytes=0-", 1, R::kSatisfiable, 0, 0},
      {"  Bytes=2-3 \t", 10, R::kSatisfiable, 2, 3},
      {"bytes= 2-3 ", 10, R::kSatisfiable, 2, 3},
      {"bytes=2-3,", 10, R::kSatisfiable, 2, 3},
      {"bytes=0-9223372036854775807", 10, R::kSatisfiable, 0, 9},
      {"bytes=10-", 10, R::kUnsatisfiable, 0, 0},
      {"bytes=10-20", 10, R::kUnsatisfiable, 0, 0},
      {"bytes=-0", 10, R::kUnsatisfiable, 0, 0},
      {"bytes=0-0", 0, R::kUnsatisfiable, 0, 0},
      {"bytes=-5", 0, R::kUnsatisfiable, 0, 0},
      {"bytes=0-", 0, R::kUnsatisfiable, 0, 0},
      {"bytes=0-1,2-3", 10, R::kMultiple, 0, 0},
      {"bytes=0-1 , -3", 10, R::kMultiple, 0, 0},
      {"bytes=5-3", 10, R::kIgnore, 0, 0},
      {"bytes=0-1,5-3", 10, R::kIgnore, 0, 0},
      {"bytes=0-1,x", 10, R::kIgnore, 0, 0},
      {"items=0-1", 10, R::kIgnore, 0, 0},
      {"bytes 0-1", 10, R::kIgnore, 0, 0},
      {"bytes=", 10, R::kIgnore, 0, 0},
      {"bytes=,", 10, R::kIgnore, 0, 0},
      {"bytes=-", 10, R::kIgnore, 0, 0},
      {"bytes=1", 10, R::kIgnore, 0, 0},
      {"bytes=1-2-3", 10, R::kIgnore, 0, 0},
      {"bytes=1 - 2", 10, R::kIgnore, 0, 0},
      {"bytes=+1-2", 10, R::kIgnore, 0, 0},
      {"bytes=a-b", 10, R::kIgnore, 0, 0},
      {"bytes=9223372036854775808-", 10, R::kIgnore, 0, 0},
      {"bytes=-99999999999999999999", 10, R::kIgnore, 0, 0},
      {"", 10, R::kIgnore, 0, 0},
  };
  for (const Case& c : cases) {
    INFO(c.value << " size " << c.size);
    ByteRange r{-1, -1};
    RangeResult got = ParseRange(c.value, c.size, &r);
    CHECK(got == c.result);
    if (c.result == R::kSatisfiable) {
      CHECK(r.first == c.first);
      CHECK(r.last == c.last);
    }
  }
}
