// Group commit: concurrent batches share one transaction, each atomic on its own; a failing
// batch is rolled back alone; every caller gets its own rows; a busy database fails the group.
#include "coordinator/native/db/group_commit.h"

#include <SQLiteCpp/SQLiteCpp.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <set>
#include <thread>

using namespace gleaner;
using namespace gleaner::native;

namespace {

struct DbFile {
  DbFile() {
    char t[] = "/tmp/gleaner-group-XXXXXX";
    dir = ::mkdtemp(t);
    path = dir + "/db.sqlite";
    auto db = SqliteExecutor::Open({path});
    REQUIRE(db.ok());
    core::Batch b;
    b.Add("CREATE TABLE t (id INTEGER PRIMARY KEY, k TEXT NOT NULL UNIQUE, g INTEGER NOT NULL)");
    REQUIRE((*db)->Execute(b).status.ok());
  }
  ~DbFile() {
    int rc = std::system(("rm -rf '" + dir + "'").c_str());
    (void)rc;
  }
  int64_t Count(const std::string& where = "1") {
    auto db = SqliteExecutor::Open({path});
    REQUIRE(db.ok());
    core::Batch b;
    b.Add("SELECT count(*) FROM t WHERE " + where);
    auto r = (*db)->Execute(b);
    REQUIRE(r.status.ok());
    return r.results[0].rows[0][0].AsInt();
  }
  std::string dir, path;
};

bool WaitFor(const std::function<bool()>& cond) {
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < end) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return cond();
}

// Two rows of group g; `bad` adds a third that violates UNIQUE (the whole batch must vanish).
core::Batch Pair(int g, bool bad) {
  core::Batch b;
  std::string k = "g" + std::to_string(g);
  b.Add("INSERT INTO t (k, g) VALUES (?, ?) RETURNING id", {k + "a", g});
  b.Add("INSERT INTO t (k, g) VALUES (?, ?)", {k + "b", g});
  if (bad) b.Add("INSERT INTO t (k, g) VALUES (?, ?)", {k + "a", g});
  return b;
}

}  // namespace

TEST_CASE("group commit: concurrent batches are each atomic, failures are isolated",
          "[group_commit]") {
  DbFile db;
  auto gc = GroupCommitter::Start({db.path});
  REQUIRE(gc.ok());
  constexpr int kThreads = 8, kEach = 60;
  std::atomic<int> ok{0}, conflicts{0}, other{0};
  std::vector<std::thread> threads;
  std::mutex ids_mu;
  std::set<int64_t> ids;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        int g = t * kEach + i;
        core::BatchResult r = (*gc)->Execute(Pair(g, g % 7 == 3));
        if (r.status.ok()) {
          ++ok;
          std::lock_guard<std::mutex> lock(ids_mu);
          ids.insert(r.results[0].rows[0][0].AsInt());
        } else if (r.status.code() == Code::kConflict) {
          ++conflicts;
        } else {
          ++other;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  int bad = 0;
  for (int g = 0; g < kThreads * kEach; ++g) bad += g % 7 == 3;
  CHECK(other == 0);
  CHECK(conflicts == bad);
  CHECK(ok == kThreads * kEach - bad);
  CHECK(ids.size() == size_t(ok.load()));  // each caller got its own RETURNING row
  // Every good batch has both rows, no failing batch left anything behind.
  CHECK(db.Count() == 2 * int64_t(ok.load()));
  CHECK(db.Count("g % 7 = 3") == 0);
  auto st = (*gc)->stats();
  CHECK(st.batches == kThreads * kEach);
  CHECK(st.groups <= st.batches);
}

TEST_CASE("group commit: batches queued behind a held write lock commit as one group",
          "[group_commit]") {
  DbFile db;
  auto gc = GroupCommitter::Start({db.path});
  REQUIRE(gc.ok());
  // Another connection holds the write lock: the writer's BEGIN waits (busy timeout) while the
  // other callers queue up behind it.
  SQLite::Database other(db.path, SQLite::OPEN_READWRITE);
  other.exec("BEGIN IMMEDIATE");
  constexpr int kCallers = 12;
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  auto call = [&](int i) { ok += (*gc)->Execute(Pair(i, i == 5)).status.ok() ? 1 : 0; };
  threads.emplace_back(call, 0);  // taken by the writer, which then waits for the lock
  REQUIRE(WaitFor([&] { return (*gc)->stats().in_flight == 1; }));
  for (int i = 1; i < kCallers; ++i) threads.emplace_back(call, i);
  REQUIRE(WaitFor([&] { return (*gc)->queued() == kCallers - 1; }));
  other.exec("COMMIT");
  for (auto& t : threads) t.join();
  CHECK(ok == kCallers - 1);
  auto st = (*gc)->stats();
  CHECK(st.groups == 2);
  CHECK(st.largest == kCallers - 1);
  CHECK(db.Count() == 2 * (kCallers - 1));
  CHECK(db.Count("g = 5") == 0);
}

TEST_CASE("group commit: ExecuteGroup rolls back a failing batch alone", "[group_commit]") {
  DbFile db;
  auto exec = SqliteExecutor::Open({db.path});
  REQUIRE(exec.ok());
  core::Batch a = Pair(1, false), b = Pair(2, true), c = Pair(3, false);
  core::Batch d;
  d.Add("SELECT count(*) FROM t");  // sees the batches before it (serial order)
  auto results = (*exec)->ExecuteGroup({&a, &b, &c, &d});
  REQUIRE(results.size() == 4);
  CHECK(results[0].status.ok());
  CHECK(results[1].status.code() == Code::kConflict);
  CHECK(results[1].results.empty());
  CHECK(results[2].status.ok());
  REQUIRE(results[3].status.ok());
  CHECK(results[3].results[0].rows[0][0].AsInt() == 4);
  CHECK(db.Count() == 4);
  CHECK(db.Count("g = 2") == 0);
}

TEST_CASE("group commit: a busy database fails every batch of the group and changes nothing",
          "[group_commit]") {
  DbFile db;
  SqliteOptions o{db.path};
  o.busy_timeout_ms = 20;
  auto gc = GroupCommitter::Start(o);
  REQUIRE(gc.ok());
  SQLite::Database other(db.path, SQLite::OPEN_READWRITE);
  other.exec("BEGIN IMMEDIATE");
  core::BatchResult r = (*gc)->Execute(Pair(1, false));
  CHECK(r.status.code() == Code::kUnavailable);
  other.exec("ROLLBACK");
  CHECK(db.Count() == 0);
  CHECK((*gc)->Execute(Pair(1, false)).status.ok());
  CHECK(db.Count() == 2);
}

TEST_CASE("batches say whether they write (read-only ones run in a plain read transaction)",
          "[group_commit]") {
  DbFile db;
  auto exec = SqliteExecutor::Open({db.path});
  REQUIRE(exec.ok());
  core::Batch reads;
  reads.Add("SELECT * FROM t WHERE k = ?", {"x"}).Add("SELECT count(*) FROM t");
  CHECK_FALSE(reads.writes());
  CHECK((*exec)->Execute(reads).status.ok());
  CHECK(Pair(1, false).writes());
  core::Batch returning;
  returning.Add("UPDATE t SET g = 1 WHERE id = 0 RETURNING id");
  CHECK(returning.writes());
  CHECK((*exec)->Execute(returning).status.ok());
}

TEST_CASE("group commit: submitted batches are answered in order, after their commit",
          "[group_commit]") {
  DbFile db;
  auto gc = GroupCommitter::Start({db.path});
  REQUIRE(gc.ok());
  // The writer waits for the lock while all 20 are queued: they form one group, and each
  // callback sees its own batch's result; none before the commit made the rows visible.
  SQLite::Database other(db.path, SQLite::OPEN_READWRITE);
  other.exec("BEGIN IMMEDIATE");
  constexpr int kBatches = 20;
  std::vector<core::Batch> batches;
  for (int i = 0; i < kBatches; ++i) batches.push_back(Pair(i, i == 7));
  std::mutex mu;
  std::vector<int> order;
  std::vector<Code> codes(kBatches, Code::kInternal);
  std::vector<int64_t> seen_rows(kBatches, -1);
  std::vector<std::pair<const core::Batch*, GroupCommitter::Done>> items;
  for (int i = 0; i < kBatches; ++i) {
    items.emplace_back(&batches[size_t(i)], [&, i](core::BatchResult r) {
      std::lock_guard<std::mutex> lock(mu);
      order.push_back(i);
      codes[size_t(i)] = r.status.code();
      seen_rows[size_t(i)] = db.Count();  // committed rows visible to another connection
    });
  }
  (*gc)->SubmitAll(std::move(items));
  REQUIRE(WaitFor([&] { return (*gc)->stats().in_flight == size_t(kBatches); }));
  other.exec("COMMIT");
  REQUIRE(WaitFor([&] {
    std::lock_guard<std::mutex> lock(mu);
    return order.size() == size_t(kBatches);
  }));
  for (int i = 0; i < kBatches; ++i) {
    CHECK(order[size_t(i)] == i);
    CHECK(codes[size_t(i)] == (i == 7 ? Code::kConflict : Code::kOk));
    CHECK(seen_rows[size_t(i)] == 2 * (kBatches - 1));  // the whole group was already durable
  }
  CHECK((*gc)->stats().groups == 1);
}

TEST_CASE("group commit: batches still queued at destruction are answered unavailable",
          "[group_commit]") {
  DbFile db;
  SqliteOptions o{db.path};
  o.busy_timeout_ms = 300;
  auto gc = GroupCommitter::Start(o);
  REQUIRE(gc.ok());
  SQLite::Database other(db.path, SQLite::OPEN_READWRITE);
  other.exec("BEGIN IMMEDIATE");
  core::Batch first = Pair(1, false), second = Pair(2, false);
  std::atomic<int> unavailable{0}, answered{0};
  auto count = [&](core::BatchResult r) {
    unavailable += r.status.code() == Code::kUnavailable ? 1 : 0;
    ++answered;
  };
  (*gc)->Submit(&first, count);
  REQUIRE(WaitFor([&] { return (*gc)->stats().in_flight == 1; }));
  (*gc)->Submit(&second, count);
  gc->reset();  // the first fails on the busy lock, the second is never run
  CHECK(answered == 2);
  CHECK(unavailable == 2);
  other.exec("ROLLBACK");
  CHECK(db.Count() == 0);
}
