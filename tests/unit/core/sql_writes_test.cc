// Batch::writes(): the core says whether a batch writes, from its own SQL text (the native shell
// routes on it; tests/unit/core/query_plan_test.cc checks it against SQLite for every hot path).
#include <catch2/catch.hpp>

#include "coordinator/core/sql.h"

using namespace gleaner::core;

TEST_CASE("a statement writes unless it only selects", "[sql]") {
  CHECK_FALSE(StatementWrites("SELECT 1"));
  CHECK_FALSE(StatementWrites("  -- note\n /* x */ select * FROM t"));
  CHECK_FALSE(StatementWrites("VALUES (1)"));
  CHECK_FALSE(StatementWrites("WITH a AS (SELECT 1) SELECT * FROM a WHERE note = 'delete'"));
  CHECK(StatementWrites("WITH a AS (SELECT 1) DELETE FROM t WHERE id IN a"));
  CHECK(StatementWrites("INSERT INTO t VALUES (1)"));
  CHECK(StatementWrites("UPDATE t SET x = 1 RETURNING id"));
  CHECK(StatementWrites("PRAGMA user_version = 3"));
  CHECK(StatementWrites(""));
  Batch b;
  b.Add("SELECT 1");
  CHECK_FALSE(b.writes());
  b.Add("DELETE FROM t");
  CHECK(b.writes());
}
