// SqliteExecutor: runs the core's SQL batches on a SQLite file (SQLiteCpp).
//
// This file is the adapter where SQLiteCpp's exceptions are caught; nothing thrown escapes it.
// Each Execute() runs the whole batch inside BEGIN IMMEDIATE … COMMIT and rolls back on any
// error, so a batch is atomic. The connection uses WAL, synchronous=FULL (configurable) and a
// busy timeout, so several processes may share one database file.
// Threading: one SqliteExecutor per thread (it owns one connection); not thread-safe.
#pragma once

#include <memory>
#include <string>

#include "coordinator/core/sql.h"

namespace gleaner::native {

struct SqliteOptions {
  std::string path;  // file path or ":memory:"
  int busy_timeout_ms = 10000;
  std::string synchronous = "FULL";  // FULL (durable) or NORMAL
};

class SqliteExecutor : public core::SqlExecutor {
 public:
  // Opens (creating if needed) the database. Errors name the file and SQLite's message.
  static Result<std::unique_ptr<SqliteExecutor>> Open(const SqliteOptions& options);
  ~SqliteExecutor() override;

  core::BatchResult Execute(const core::Batch& batch) override;

 private:
  struct Impl;
  explicit SqliteExecutor(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gleaner::native
