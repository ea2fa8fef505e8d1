#include "coordinator/core/migrations.h"

#include <catch2/catch.hpp>

#include "coordinator/core/coordinator.h"
#include "coordinator/native/db/sqlite_executor.h"

using namespace gleaner;
using namespace gleaner::core;

namespace {
std::unique_ptr<native::SqliteExecutor> Memory() {
  auto db = native::SqliteExecutor::Open({":memory:"});
  REQUIRE(db.ok());
  return std::move(db).value();
}
CoreConfig TestConfig() {
  CoreConfig c;
  c.blob_signing_key = "0123456789abcdef0123456789abcdef";
  return c;
}
}  // namespace

TEST_CASE("migrations apply once and are idempotent", "[migrations]") {
  auto db = Memory();
  Coordinator coord(TestConfig());
  Plan first = Drive(coord.MigrationPlan(), *db);
  REQUIRE(first.response().status == 200);
  CHECK(first.response().body == "{\"applied\":" + std::to_string(Migrations().size()) + "}");
  Plan second = Drive(coord.MigrationPlan(), *db);
  CHECK(second.response().body == "{\"applied\":0}");
  Batch b;
  b.Add("SELECT usd_per_hour FROM prices WHERE gpu = '*'");
  BatchResult r = db->Execute(b);
  REQUIRE(r.status.ok());
  CHECK(r.results[0].rows[0][0].AsReal() == Approx(0.324));
}

TEST_CASE("a failing statement rolls back the whole batch", "[sql]") {
  auto db = Memory();
  Batch setup;
  setup.Add("CREATE TABLE t (id INTEGER PRIMARY KEY)");
  REQUIRE(db->Execute(setup).status.ok());
  Batch b;
  b.Add("INSERT INTO t (id) VALUES (1)").Add("INSERT INTO t (id) VALUES (1)");
  BatchResult r = db->Execute(b);
  CHECK(r.status.code() == Code::kConflict);
  Batch count;
  count.Add("SELECT count(*) FROM t");
  CHECK(db->Execute(count).results[0].rows[0][0].AsInt() == 0);
}

TEST_CASE("SplitSqlStatements handles comments and quoted semicolons", "[migrations]") {
  auto s = SplitSqlStatements("-- c;\nCREATE TABLE a (x TEXT DEFAULT ';'); -- tail\n\nSELECT 1;");
  REQUIRE(s.size() == 2);
  CHECK(s[0].rfind("CREATE TABLE a", 0) == 0);
  CHECK(s[1] == "SELECT 1");
}

TEST_CASE("FormatTime renders RFC 3339 UTC with milliseconds", "[http]") {
  CHECK(FormatTime(0) == "1970-01-01T00:00:00.000Z");
  CHECK(FormatTime(1795759200123) == "2026-11-27T06:00:00.123Z");
  CHECK(FormatTime(951782400000) == "2000-02-29T00:00:00.000Z");
}
