// PlanRunner: drives the core's Plans on SQLite, one connection per calling thread.
//
// Each thread that calls Run() gets its own SqliteExecutor (opened lazily, closed when the runner
// is destroyed), so HTTP worker threads and the maintenance thread never share a connection.
// Batches that only read run there (a WAL snapshot, concurrently); batches that write go to one
// GroupCommitter (group_commit.h) when SqliteOptions::group_commit is set (file databases), so
// concurrent requests share one COMMIT and its fsync.
// A batch that fails with kUnavailable (database busy past SQLite's busy timeout, e.g. another
// process holding the write lock) is retried a few times with backoff; after that the failure
// goes to the core, which answers 503. A batch that fails leaves the database unchanged (it ran
// in one BEGIN IMMEDIATE transaction), so retrying is safe.
// Threading: Run() is thread-safe; the runner must outlive every thread that calls it.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "coordinator/core/plan.h"
#include "coordinator/native/db/group_commit.h"
#include "coordinator/native/db/sqlite_executor.h"

namespace gleaner::native {

class PlanRunner {
 public:
  explicit PlanRunner(SqliteOptions db, int busy_retries = 4);

  // Runs the plan to completion; returns the final plan (response + blob deletes).
  // If this thread's connection cannot be opened, answers 503.
  core::Plan Run(core::Plan plan);

  // Executes one batch on this thread's connection (with busy retries).
  core::BatchResult Execute(const core::Batch& batch);

  // For shells that run batches themselves (the event loop; core::Batch::writes() says which
  // queue): the process's one committer (opened on first use; with group_commit off it commits
  // every batch alone), and the database options.
  Result<GroupCommitter*> Committer();
  const SqliteOptions& db() const { return db_; }

 private:
  Result<SqliteExecutor*> ThisThreadExecutor();
  Result<SqliteExecutor*> LookUpThisThreadExecutor();

  const uint64_t id_;  // distinguishes runners in the per-thread executor cache
  SqliteOptions db_;
  int busy_retries_;
  std::mutex mu_;
  std::map<std::thread::id, std::unique_ptr<SqliteExecutor>> executors_;
  std::mutex committer_mu_;
  std::unique_ptr<GroupCommitter> committer_;  // opened on the first write
};

}  // namespace gleaner::native
