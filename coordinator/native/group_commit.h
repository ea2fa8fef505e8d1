// GroupCommitter: durable writes at the speed of one fsync per group, not per request.
//
// Callers on many threads hand in write batches. There is no writer thread: the first caller that
// finds no group running becomes the leader; on its own thread it takes everything queued, runs
// it on the committer's connection as ONE transaction with a SAVEPOINT per batch
// (SqliteExecutor::ExecuteGroup: a failing batch is rolled back alone) and COMMITs once with the
// connection's synchronous setting (FULL by default). Then it hands leadership to the oldest
// caller still queued (whose group starts at once) and only after that wakes the callers of its
// own group (the first of them, which wakes the next, and so on), so waking them overlaps with the
// next group's work. Each caller gets its own batch's
// result only after that COMMIT returned, so an acknowledged write is durable. Semantics per batch
// are those of SqliteExecutor::Execute (atomic; constraint → kConflict; busy → kUnavailable), and
// batches behave as if run one after another in queue order.
// Threading: Execute() from any thread (the connection is used by one leader at a time); every
// Execute() must have returned before the destructor runs.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>

#include "coordinator/native/sqlite_executor.h"

namespace gleaner::native {

class GroupCommitter {
 public:
  // Page cache of the committer's connection unless SqliteOptions::cache_kib says otherwise.
  static constexpr int kCommitterCacheKib = 64 * 1024;

  // Opens the committer's connection. max_group bounds one transaction.
  static Result<std::unique_ptr<GroupCommitter>> Start(const SqliteOptions& db,
                                                       size_t max_group = 256);
  ~GroupCommitter();

  // Queues the batch and blocks until its group committed (or failed); may run groups (its own
  // and earlier callers') on this thread.
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
  // its callers (and handing over leadership exactly one), without a herd on the queue's mutex.
  struct Pending {
    const core::Batch* batch = nullptr;
    core::BatchResult result;
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;  // result is set
    bool lead = false;  // this caller is the leader now
    // Set with the result: the caller of the same group this one wakes once it is awake, so the
    // leader wakes one caller per group and the wake-ups run on the callers' threads.
    Pending* wake_next = nullptr;
  };
  GroupCommitter(std::unique_ptr<SqliteExecutor> db, size_t max_group);
  // Runs groups from the queue on this thread until `self` is done; hands leadership on.
  void Lead(Pending* self);
  // Marks p done and wakes it; returns the caller p must wake next.
  static void Wake(Pending* p);

  std::unique_ptr<SqliteExecutor> db_;
  size_t max_group_;
  mutable std::mutex mu_;
  std::deque<Pending*> queue_;
  bool leading_ = false;  // a caller is the leader (running or about to run a group)
  bool stop_ = false;
  Stats stats_;
};

}  // namespace gleaner::native
