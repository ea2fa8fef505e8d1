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

TEST_CASE("migration 3 counts the active jobs a database already holds", "[migrations]") {
  auto db = Memory();
  Batch older;
  older.Add(
      "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, "
      "applied_at INTEGER NOT NULL)");
  for (const Migration& m : Migrations()) {
    if (m.version >= 3) continue;
    older.Add("INSERT INTO schema_migrations VALUES (?, ?, 0)", {m.version, m.name});
    for (const std::string& stmt : SplitSqlStatements(m.sql)) older.Add(stmt);
  }
  older.Add(
      "INSERT INTO api_keys (id, token_hash, role, name, created_at) VALUES "
      "('k_a', 'ha', 'developer', 'a', 0), ('k_b', 'hb', 'developer', 'b', 0)");
  const char* states[] = {"pending", "running", "completed", "failed", "canceled", "pending"};
  int i = 0;
  for (const char* state : states) {
    older.Add(
        "INSERT INTO jobs (id, owner_key_id, kind, spec, state, max_failures, steps_total, "
        "created_at, updated_at) VALUES (?, 'k_a', 'synthetic', '{}', ?, 3, 10, 0, 0)",
        {"j_" + std::to_string(i++), state});
  }
  REQUIRE(db->Execute(older).status.ok());
  Coordinator coord(TestConfig());
  REQUIRE(Drive(coord.MigrationPlan(), *db).response().status == 200);
  Batch read;
  read.Add("SELECT id, active_jobs FROM api_keys ORDER BY id");
  BatchResult r = db->Execute(read);
  REQUIRE(r.status.ok());
  CHECK(r.results[0].Get(0, "active_jobs").AsInt() == 3);
  CHECK(r.results[0].Get(1, "active_jobs").AsInt() == 0);
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

TEST_CASE("SplitSqlStatements keeps a trigger's body whole", "[migrations]") {
  auto s = SplitSqlStatements(
      "CREATE TRIGGER t AFTER INSERT ON a BEGIN\n  UPDATE b SET n = n + 1; -- ; here\n"
      "  UPDATE c SET legend = 'end;';\nEND;\nCreate  Temp Trigger u AFTER DELETE ON a "
      "BEGIN DELETE FROM b; end ;\nSELECT 1;");
  REQUIRE(s.size() == 3);
  CHECK(s[0].rfind("CREATE TRIGGER t", 0) == 0);
  CHECK(s[0].find("legend = 'end;';\nEND") != std::string::npos);
  CHECK(s[1].rfind("Create  Temp Trigger u", 0) == 0);
  CHECK(s[2] == "SELECT 1");
}

TEST_CASE("FormatTime renders RFC 3339 UTC with milliseconds", "[http]") {
  CHECK(FormatTime(0) == "1970-01-01T00:00:00.000Z");
  CHECK(FormatTime(1795759200123) == "2026-11-27T06:00:00.123Z");
  CHECK(FormatTime(951782400000) == "2000-02-29T00:00:00.000Z");
}
