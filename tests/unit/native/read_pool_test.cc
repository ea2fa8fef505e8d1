// ReadPool: read-only batches run off the caller's thread; queued ones share a read transaction
// and each still gets its own rows or its own error.
#include "coordinator/native/db/read_pool.h"

#include <stdlib.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <mutex>
#include <thread>

using namespace gleaner;
using namespace gleaner::native;

namespace {

struct Db {
  Db() {
    char t[] = "/tmp/gleaner-readpool-XXXXXX";
    dir = ::mkdtemp(t);
    path = dir + "/db.sqlite";
    auto db = SqliteExecutor::Open({path});
    REQUIRE(db.ok());
    core::Batch b;
    b.Add("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)");
    for (int i = 0; i < 50; ++i)
      b.Add("INSERT INTO t (id, v) VALUES (?, ?)", {i, "v" + std::to_string(i)});
    REQUIRE((*db)->Execute(b).status.ok());
  }
  ~Db() {
    int rc = std::system(("rm -rf '" + dir + "'").c_str());
    (void)rc;
  }
  std::string dir, path;
};

}  // namespace

TEST_CASE("read pool: every batch gets its own rows, a bad one only its own error", "[read_pool]") {
  Db db;
  auto pool = ReadPool::Start({db.path}, 2);
  REQUIRE(pool.ok());
  constexpr int kBatches = 200;
  std::vector<core::Batch> batches(kBatches);
  for (int i = 0; i < kBatches; ++i) {
    if (i % 17 == 5) {
      batches[size_t(i)].Add("SELECT nope FROM t");
    } else {
      batches[size_t(i)].Add("SELECT v FROM t WHERE id = ?", {i % 50});
    }
  }
  std::mutex mu;
  std::vector<std::string> got(kBatches);
  std::vector<bool> failed(kBatches, false);
  int answered = 0;
  std::vector<std::pair<const core::Batch*, ReadPool::Done>> items;
  for (int i = 0; i < kBatches; ++i) {
    items.emplace_back(&batches[size_t(i)], [&, i](core::BatchResult r) {
      std::lock_guard<std::mutex> lock(mu);
      ++answered;
      if (!r.status.ok()) {
        failed[size_t(i)] = true;
      } else {
        got[size_t(i)] = r.results[0].rows[0][0].AsText();
      }
    });
  }
  (*pool)->SubmitAll(std::move(items));
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (answered == kBatches) break;
    }
    REQUIRE(std::chrono::steady_clock::now() < end);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  for (int i = 0; i < kBatches; ++i) {
    if (i % 17 == 5) {
      CHECK(failed[size_t(i)]);
    } else {
      CHECK_FALSE(failed[size_t(i)]);
      CHECK(got[size_t(i)] == "v" + std::to_string(i % 50));
    }
  }
}

TEST_CASE("read pool: ExecuteReadGroup sees one snapshot for the whole group", "[read_pool]") {
  Db db;
  auto reader = SqliteExecutor::Open({db.path});
  auto writer = SqliteExecutor::Open({db.path});
  REQUIRE(reader.ok());
  REQUIRE(writer.ok());
  core::Batch count;
  count.Add("SELECT count(*) FROM t");
  auto results = (*reader)->ExecuteReadGroup({&count, &count});
  REQUIRE(results.size() == 2);
  CHECK(results[0].results[0].rows[0][0].AsInt() == 50);
  core::Batch insert;
  insert.Add("INSERT INTO t (id, v) VALUES (100, 'x')");
  REQUIRE((*writer)->Execute(insert).status.ok());
  results = (*reader)->ExecuteReadGroup({&count});
  CHECK(results[0].results[0].rows[0][0].AsInt() == 51);  // a new group, a new snapshot
}
