// SqliteExecutor: runs the core's SQL batches on a SQLite file (SQLiteCpp).
//
// This file is the adapter where SQLiteCpp's exceptions are caught; nothing thrown escapes it.
// Each Execute() runs the whole batch inside BEGIN IMMEDIATE … COMMIT (a batch that only reads:
// a deferred BEGIN, i.e. a WAL snapshot that never waits for the write lock) and rolls back on any
// error, so a batch is atomic. ExecuteGroup() is the group commit: many batches in one
// transaction, one SAVEPOINT each, one COMMIT (one fsync) for all. The connection uses WAL,
// synchronous=FULL (configurable) and a busy timeout, so several processes may share one database
// file. Threading: not thread-safe: one thread at a time uses an executor (its connection is
// opened without SQLite's own mutex).
#pragma once

#include <memory>
#include <string>

#include "coordinator/core/sql.h"

namespace gleaner::native {

struct SqliteOptions {
  std::string path;  // file path or ":memory:"
  int busy_timeout_ms = 10000;
  std::string synchronous = "FULL";  // FULL (durable) or NORMAL
  bool group_commit = true;          // PlanRunner: writes share commits (ignored for :memory:)
  int cache_kib = 0;                 // page cache of the connection; 0: SQLite's default (2 MiB)
};

class SqliteExecutor : public core::SqlExecutor {
 public:
  // Opens (creating if needed) the database. Errors name the file and SQLite's message.
  static Result<std::unique_ptr<SqliteExecutor>> Open(const SqliteOptions& options);
  ~SqliteExecutor() override;

  core::BatchResult Execute(const core::Batch& batch) override;

  // Runs the batches in ONE transaction (BEGIN IMMEDIATE … COMMIT), each inside its own
  // SAVEPOINT: a failing batch is rolled back alone and gets its error (constraint → kConflict),
  // the others still commit. If BEGIN or COMMIT fails every batch gets that error and nothing
  // changed. Returns one result per batch, in order.
  std::vector<core::BatchResult> ExecuteGroup(const std::vector<const core::Batch*>& batches);

  // Runs read-only batches in ONE read transaction (one WAL snapshot for all of them: the pages a
  // commit invalidated are read again once per group, not once per batch). A failing batch gets
  // its own error; if BEGIN fails every batch gets that error. One result per batch, in order.
  // Requires !batch.writes() for each (a write would fail with the database's read-only error).
  std::vector<core::BatchResult> ExecuteReadGroup(const std::vector<const core::Batch*>& batches);

 private:
  struct Impl;
  // ExecuteGroup (writes: BEGIN IMMEDIATE, a SAVEPOINT per batch) or ExecuteReadGroup.
  std::vector<core::BatchResult> RunGroup(const std::vector<const core::Batch*>& batches,
                                          bool writes);
  // Runs the statements of one batch inside the current transaction (throws SQLiteCpp's
  // exceptions; the public functions catch them).
  static void RunBatch(Impl& impl, const core::Batch& batch, core::BatchResult* result);
  explicit SqliteExecutor(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gleaner::native
