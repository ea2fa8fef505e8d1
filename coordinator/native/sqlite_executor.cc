#include "coordinator/native/sqlite_executor.h"

#include <SQLiteCpp/SQLiteCpp.h>
#include <sqlite3.h>

#include <chrono>
#include <thread>
#include <unordered_map>

namespace gleaner::native {

struct SqliteExecutor::Impl {
  explicit Impl(const SqliteOptions& o)
      : db(o.path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE | SQLite::OPEN_FULLMUTEX) {}
  SQLite::Database db;
  // Prepared statements are cached by SQL text (the core's statements are a small fixed set).
  std::unordered_map<std::string, std::unique_ptr<SQLite::Statement>> cache;

  SQLite::Statement& Prepare(const std::string& sql) {
    auto it = cache.find(sql);
    if (it != cache.end()) {
      it->second->reset();
      it->second->clearBindings();
      return *it->second;
    }
    auto stmt = std::make_unique<SQLite::Statement>(db, sql);
    SQLite::Statement& ref = *stmt;
    if (cache.size() > 512) cache.clear();
    cache.emplace(sql, std::move(stmt));
    return ref;
  }
};

SqliteExecutor::SqliteExecutor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SqliteExecutor::~SqliteExecutor() = default;

Result<std::unique_ptr<SqliteExecutor>> SqliteExecutor::Open(const SqliteOptions& options) {
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
        stmt.bind(idx, v.AsText());
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
    impl_->db.exec("BEGIN IMMEDIATE");
    in_tx = true;
    result.results.reserve(batch.statements.size());
    for (const core::Statement& s : batch.statements) {
      SQLite::Statement& stmt = impl_->Prepare(s.sql);
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
      result.results.push_back(std::move(rows));
    }
    impl_->db.exec("COMMIT");
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
      impl_->db.exec("ROLLBACK");
    } catch (...) {
      // The connection is in an unknown state; the next BEGIN reports it.
    }
  }
  return result;
}

}  // namespace gleaner::native
