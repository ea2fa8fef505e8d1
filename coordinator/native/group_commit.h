// GroupCommitter: durable writes at the speed of one fsync per group, not per request.
//
// Callers on many threads hand in write batches; one writer thread with its own connection takes
// everything queued, runs it as ONE transaction with a SAVEPOINT per batch
// (SqliteExecutor::ExecuteGroup: a failing batch is rolled back alone) and COMMITs once with the
// connection's synchronous setting (FULL by default). Each caller gets its own batch's result only
// after that COMMIT returned, so an acknowledged write is durable. Semantics per batch are those
// of SqliteExecutor::Execute (atomic; constraint → kConflict; busy → kUnavailable), and batches
// behave as if run one after another in queue order.
// Threading: Execute() from any thread; the destructor finishes queued work and joins.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "coordinator/native/sqlite_executor.h"

namespace gleaner::native {

class GroupCommitter {
 public:
  // Opens the writer's connection and starts its thread. max_group bounds one transaction.
  static Result<std::unique_ptr<GroupCommitter>> Start(const SqliteOptions& db,
                                                       size_t max_group = 256);
  ~GroupCommitter();

  // Queues the batch and blocks until its group committed (or failed).
  core::BatchResult Execute(const core::Batch& batch);

  struct Stats {
    int64_t groups = 0;    // transactions committed (or failed)
    int64_t batches = 0;   // batches run
    size_t largest = 0;    // largest group
    size_t in_flight = 0;  // batches of the group being run now
  };
  Stats stats() const;
  // Batches waiting for the next group (not counting the group being committed).
  size_t queued() const;

 private:
  // One waiting caller. Each has its own lock and condition, so finishing a group wakes exactly
  // its callers, without a herd on the queue's mutex.
  struct Pending {
    const core::Batch* batch = nullptr;
    core::BatchResult result;
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
  };
  GroupCommitter(std::unique_ptr<SqliteExecutor> db, size_t max_group);
  void Loop();

  std::unique_ptr<SqliteExecutor> db_;
  size_t max_group_;
  mutable std::mutex mu_;
  std::condition_variable work_cv_;
  std::deque<Pending*> queue_;
  bool stop_ = false;
  Stats stats_;
  std::thread thread_;
};

}  // namespace gleaner::native
