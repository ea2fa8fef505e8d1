// ReadPool: runs the core's read-only batches for the event loop on a few threads, each with its
// own SQLite connection, so the loop never waits for the database.
//
// A thread takes everything queued (up to max_group) and runs it as one read transaction
// (SqliteExecutor::ExecuteReadGroup): one WAL snapshot per group, so after a commit the pages are
// read again once per group instead of once per request. A batch still sees a snapshot taken
// after it was submitted. A batch failing with kUnavailable (busy) is retried alone a few times
// with backoff, like PlanRunner does.
// Threading: SubmitAll() from any thread; `done` runs on a pool thread and must be quick (hand the
// result over, never block). The destructor fails what is still queued with kUnavailable, then
// joins the threads.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "coordinator/native/db/batch_queue.h"
#include "coordinator/native/db/sqlite_executor.h"

namespace gleaner::native {

class ReadPool {
 public:
  using Done = BatchDone;

  // Opens `threads` connections (fails if the first cannot be opened) and starts the threads.
  static Result<std::unique_ptr<ReadPool>> Start(const SqliteOptions& db, int threads,
                                                 size_t max_group = 128);
  ~ReadPool();

  // Queues read-only batches (one wake-up); each must stay alive until its `done` runs.
  void SubmitAll(BatchItems items);

 private:
  ReadPool(std::vector<std::unique_ptr<SqliteExecutor>> dbs, size_t max_group);
  void Work(SqliteExecutor* db);

  size_t max_group_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<QueuedBatch> queue_;
  size_t idle_ = 0;  // threads waiting on cv_
  bool stop_ = false;
  std::vector<std::unique_ptr<SqliteExecutor>> dbs_;
  std::vector<std::thread> threads_;
};

}  // namespace gleaner::native
