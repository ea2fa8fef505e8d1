// GroupCommitter: durable writes at the speed of one fsync per group, not per request.
//
// Callers hand in write batches, synchronously (Execute: blocks) or asynchronously (Submit: a
// callback gets the result). One writer thread takes everything queued (up to max_group), runs it
// on the committer's connection as ONE transaction with a SAVEPOINT per batch
// (SqliteExecutor::ExecuteGroup: a failing batch is rolled back alone) and COMMITs once with the
// connection's synchronous setting (FULL by default). Only after that COMMIT returned does any
// caller get its batch's result, so an acknowledged write is durable. Semantics per batch are
// those of SqliteExecutor::Execute (atomic; constraint → kConflict; busy → kUnavailable), and
// batches behave as if run one after another in queue order. The writer is the process's only
// writing connection, so its page cache survives commits.
// Threading: Execute()/Submit() from any thread. Submit callbacks run on the writer thread, in
// queue order, one group at a time; they must be quick (hand the result over, never block).
// The destructor fails what is still queued with kUnavailable, then joins the writer.
#pragma once

#include <condition_variable>
#include <cstdint>
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

class GroupCommitter {
 public:
  // Page cache of the committer's connection unless SqliteOptions::cache_kib says otherwise.
  static constexpr int kCommitterCacheKib = 64 * 1024;

  using Done = BatchDone;

  // Opens the committer's connection and starts the writer. max_group bounds one transaction
  // (1: one commit per batch, for comparisons).
  static Result<std::unique_ptr<GroupCommitter>> Start(const SqliteOptions& db,
                                                       size_t max_group = 256);
  ~GroupCommitter();

  // Queues the batch and blocks until its group committed (or failed).
  core::BatchResult Execute(const core::Batch& batch);

  // Queues the batch; `done` gets the result on the writer thread. The batch must stay alive
  // until `done` runs.
  void Submit(const core::Batch* batch, Done done);
  // Queues several batches at once (one wake-up of the writer), in order.
  void SubmitAll(BatchItems items);

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
  GroupCommitter(std::unique_ptr<SqliteExecutor> db, size_t max_group);
  void WriterLoop();

  std::unique_ptr<SqliteExecutor> db_;
  size_t max_group_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<QueuedBatch> queue_;
  bool stop_ = false;
  Stats stats_;
  std::thread writer_;
};

}  // namespace gleaner::native
