#include "coordinator/native/db/sqlite_executor.h"

#include <SQLiteCpp/SQLiteCpp.h>
#include <sqlite3.h>

#include <chrono>
#include <thread>
#include <unordered_map>

namespace gleaner::native {

struct SqliteExecutor::Impl {
  explicit Impl(const SqliteOptions& o)
      : db(o.path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE | SQLite::OPEN_NOMUTEX) {}
  SQLite::Database db;
  // Prepared statements are cached by SQL text (the core's statements are a small fixed set).
  std::unordered_map<std::string, std::unique_ptr<SQLite::Statement>> cache;

  SQLite::Statement& Prepare(const std::string& sql) {
    auto it = cache.find(sql);
    if (it != cache.end()) {
      // tryReset: reset() would throw the error of the statement's last failed step (a
      // constraint violation in an earlier batch), failing this batch for nothing.
      it->second->tryReset();
      it->second->clearBindings();
      return *it->second;
    }
    auto stmt = std::make_unique<SQLite::Statement>(db, sql);
    SQLite::Statement& ref = *stmt;
    if (cache.size() > 512) cache.clear();
    cache.emplace(sql, std::move(stmt));
    return ref;
  }

  // Runs a transaction-control statement (BEGIN, SAVEPOINT, COMMIT, …) from the statement cache:
  // no parse per call. Throws SQLiteCpp's exception on failure.
  void Exec(const std::string& sql) {
    SQLite::Statement& stmt = Prepare(sql);
    stmt.exec();
    stmt.tryReset();
  }
};

SqliteExecutor::SqliteExecutor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SqliteExecutor::~SqliteExecutor() = default;

Result<std::unique_ptr<SqliteExecutor>> SqliteExecutor::Open(const SqliteOptions& options) {
  // Memory statistics take a global mutex on every allocation SQLite makes, from every
  // connection's thread; nothing here reads them. Only possible before SQLite initializes (a
  // later call is refused harmlessly).
  static const bool kNoMemStatus = [] {
    sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
    return true;
  }();
  (void)kNoMemStatus;
  try {
    auto impl = std::make_unique<Impl>(options);
    impl->db.setBusyTimeout(options.busy_timeout_ms);
    if (options.path != ":memory:") {
      // Switching to WAL needs a lock that SQLite does not wait for with the busy handler; two
      // processes opening a fresh file at once would see SQLITE_BUSY. Retry within the timeout.
      for (int waited_ms = 0;; waited_ms += 10) {
        try {
          impl->db.exec("PRAGMA journal_mode=WAL");
          break;
        } catch (const SQLite::Exception& e) {
          int code = e.getErrorCode() & 0xff;
          if ((code != SQLITE_BUSY && code != SQLITE_LOCKED) ||
              waited_ms >= options.busy_timeout_ms) {
            throw;
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
      }
    }
    impl->db.exec("PRAGMA synchronous=" + options.synchronous);
    impl->db.exec("PRAGMA foreign_keys=ON");
    // Savepoint sub-journals (one SAVEPOINT per batch in a group) and sort scratch in memory,
    // not in temp files.
    impl->db.exec("PRAGMA temp_store=MEMORY");
    if (options.cache_kib > 0) {
      impl->db.exec("PRAGMA cache_size=-" + std::to_string(options.cache_kib));
    }
    return std::unique_ptr<SqliteExecutor>(new SqliteExecutor(std::move(impl)));
  } catch (const std::exception& e) {
    return Status::Io("cannot open database " + options.path + ": " + e.what());
  }
}

namespace {

Status StatusOfSqlite(const SQLite::Exception& e) {
  int code = e.getErrorCode() & 0xff;
  if (code == SQLITE_CONSTRAINT) return Status::Conflict(std::string("constraint: ") + e.what());
  if (code == SQLITE_BUSY || code == SQLITE_LOCKED) {
    return Status::Unavailable(std::string("database busy: ") + e.what());
  }
  if (code == SQLITE_FULL) return Status(Code::kNoSpace, std::string("disk full: ") + e.what());
  return Status::Internal(std::string("sqlite: ") + e.what());
}

void Bind(SQLite::Statement& stmt, const std::vector<core::SqlValue>& params) {
  for (size_t i = 0; i < params.size(); ++i) {
    int idx = int(i) + 1;
    const core::SqlValue& v = params[i];
    switch (v.type()) {
      case core::SqlValue::Type::kNull:
        stmt.bind(idx);
        break;
      case core::SqlValue::Type::kInt:
        stmt.bind(idx, static_cast<int64_t>(v.AsInt()));
        break;
      case core::SqlValue::Type::kReal:
        stmt.bind(idx, v.AsReal());
        break;
      case core::SqlValue::Type::kText:
        // The batch outlives the statement's use of its values (cleared at the next use).
        stmt.bindNoCopy(idx, v.AsText());
        break;
    }
  }
}

core::SqlValue ColumnValue(const SQLite::Column& c) {
  switch (c.getType()) {
    case SQLITE_INTEGER:
      return core::SqlValue(static_cast<int64_t>(c.getInt64()));
    case SQLITE_FLOAT:
      return core::SqlValue(c.getDouble());
    case SQLITE_TEXT:
    case SQLITE_BLOB:
      return core::SqlValue(c.getString());
    default:
      return core::SqlValue();
  }
}

}  // namespace

core::BatchResult SqliteExecutor::Execute(const core::Batch& batch) {
  core::BatchResult result;
  bool in_tx = false;
  try {
    impl_->Exec(batch.writes() ? "BEGIN IMMEDIATE" : "BEGIN");
    in_tx = true;
    RunBatch(*impl_, batch, &result);
    impl_->Exec("COMMIT");
    in_tx = false;
  } catch (const SQLite::Exception& e) {
    result.status = StatusOfSqlite(e);
    result.results.clear();
  } catch (const std::exception& e) {
    result.status = Status::Internal(e.what());
    result.results.clear();
  }
  if (in_tx) {
    try {
      impl_->Exec("ROLLBACK");
    } catch (...) {
      // The connection is in an unknown state; the next BEGIN reports it.
    }
  }
  return result;
}

std::vector<core::BatchResult> SqliteExecutor::ExecuteGroup(
    const std::vector<const core::Batch*>& batches) {
  return RunGroup(batches, /*writes=*/true);
}

std::vector<core::BatchResult> SqliteExecutor::ExecuteReadGroup(
    const std::vector<const core::Batch*>& batches) {
  return RunGroup(batches, /*writes=*/false);
}

std::vector<core::BatchResult> SqliteExecutor::RunGroup(
    const std::vector<const core::Batch*>& batches, bool writes) {
  std::vector<core::BatchResult> results(batches.size());
  Status group;
  bool in_tx = false;
  try {
    impl_->Exec(writes ? "BEGIN IMMEDIATE" : "BEGIN");
    in_tx = true;
    for (size_t i = 0; i < batches.size(); ++i) {
      // A batch that writes is undone alone when it fails; reads have nothing to undo.
      if (writes) impl_->Exec("SAVEPOINT b");
      bool failed = false;
      try {
        RunBatch(*impl_, *batches[i], &results[i]);
      } catch (const SQLite::Exception& e) {
        results[i].status = StatusOfSqlite(e);
        failed = true;
      } catch (const std::exception& e) {
        results[i].status = Status::Internal(e.what());
        failed = true;
      }
      if (failed) results[i].results.clear();
      if (failed && writes) impl_->Exec("ROLLBACK TO b");
      if (writes) impl_->Exec("RELEASE b");
    }
    impl_->Exec("COMMIT");
    in_tx = false;
  } catch (const SQLite::Exception& e) {
    group = StatusOfSqlite(e);
  } catch (const std::exception& e) {
    group = Status::Internal(e.what());
  }
  if (in_tx) {
    try {
      impl_->Exec("ROLLBACK");
    } catch (...) {
    }
  }
  if (!group.ok()) {
    for (core::BatchResult& r : results) {
      r.status = group;
      r.results.clear();
    }
  }
  return results;
}

void SqliteExecutor::RunBatch(Impl& impl, const core::Batch& batch, core::BatchResult* result) {
  result->results.reserve(batch.statements.size());
  for (const core::Statement& s : batch.statements) {
    SQLite::Statement& stmt = impl.Prepare(s.sql);
    Bind(stmt, s.params);
    core::Rows rows;
    int ncol = stmt.getColumnCount();
    for (int c = 0; c < ncol; ++c) rows.columns.emplace_back(stmt.getColumnName(c));
    while (stmt.executeStep()) {
      std::vector<core::SqlValue> row;
      row.reserve(size_t(ncol));
      for (int c = 0; c < ncol; ++c) row.push_back(ColumnValue(stmt.getColumn(c)));
      rows.rows.push_back(std::move(row));
    }
    stmt.reset();
    result->results.push_back(std::move(rows));
  }
}

}  // namespace gleaner::native
