#include "coordinator/native/db/plan_runner.h"

#include <SQLiteCpp/SQLiteCpp.h>
#include <stdlib.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <thread>

using namespace gleaner;
using namespace gleaner::native;

namespace {
struct DbFile {
  DbFile() {
    char t[] = "/tmp/gleaner-runner-XXXXXX";
    dir = ::mkdtemp(t);
    path = dir + "/db.sqlite";
  }
  ~DbFile() {
    int rc = std::system(("rm -rf '" + dir + "'").c_str());
    (void)rc;
  }
  std::string dir, path;
};
}  // namespace

TEST_CASE("plan runner gives each thread its own connection", "[plan_runner]") {
  DbFile db;
  PlanRunner runner({db.path});
  core::Batch create;
  create.Add("CREATE TABLE t (id INTEGER PRIMARY KEY, v INTEGER NOT NULL)");
  REQUIRE(runner.Execute(create).status.ok());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        core::Batch b;
        b.Add("INSERT INTO t (v) VALUES (?)", {t});
        auto r = runner.Execute(b);
        CHECK(r.status.ok());
      }
    });
  }
  for (auto& t : threads) t.join();
  core::Batch count;
  count.Add("SELECT COUNT(*) FROM t");
  auto r = runner.Execute(count);
  REQUIRE(r.status.ok());
  CHECK(r.results[0].rows[0][0].AsInt() == 200);
}

TEST_CASE("plan runner retries a busy database, then reports unavailable", "[plan_runner]") {
  DbFile db;
  SqliteOptions opts{db.path};
  opts.busy_timeout_ms = 10;
  PlanRunner runner(opts, /*busy_retries=*/1);
  PlanRunner patient(opts, /*busy_retries=*/7);  // backoff 5 ms x3 each time: ~3.6 s in all
  core::Batch create;
  create.Add("CREATE TABLE t (v INTEGER)");
  REQUIRE(runner.Execute(create).status.ok());

  // Another connection holds the write lock for a while.
  SQLite::Database other(db.path, SQLite::OPEN_READWRITE);
  other.exec("BEGIN IMMEDIATE");
  core::Batch insert;
  insert.Add("INSERT INTO t VALUES (1)");
  auto held = runner.Execute(insert);
  CHECK(held.status.code() == Code::kUnavailable);

  // Released during the retries: the batch goes through.
  std::thread release([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    other.exec("COMMIT");
  });
  auto later = patient.Execute(insert);
  release.join();
  CHECK(later.status.ok());
}
