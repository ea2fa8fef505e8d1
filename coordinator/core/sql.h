// The SQL vocabulary between the portable core and its shells.
//
// The core never touches a database: it emits Batches of parameterised statements ('?'
// placeholders, SQLite dialect that D1 also runs) and receives their rows. A shell executes a
// Batch atomically (all statements or none: BEGIN IMMEDIATE…COMMIT natively, db.batch() on
// D1). Every state change is one Batch of conditional statements (DESIGN §2.2); a statement that
// must only act when an earlier one did is guarded in SQL (WHERE EXISTS / a nonce), not in C++.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "shared/status.h"

namespace gleaner::core {

// One SQL value: NULL, INTEGER, REAL or TEXT (no BLOBs cross the boundary).
class SqlValue {
 public:
  enum class Type { kNull, kInt, kReal, kText };
  SqlValue() = default;
  SqlValue(int64_t v) : type_(Type::kInt), i_(v) {}                  // NOLINT
  SqlValue(int v) : type_(Type::kInt), i_(v) {}                      // NOLINT
  SqlValue(double v) : type_(Type::kReal), d_(v) {}                  // NOLINT
  SqlValue(std::string v) : type_(Type::kText), s_(std::move(v)) {}  // NOLINT
  SqlValue(const char* v) : type_(Type::kText), s_(v) {}             // NOLINT
  static SqlValue Null() { return SqlValue(); }

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::kNull; }
  // Lenient accessors: NULL reads as 0 / 0.0 / "", INTEGER and REAL convert to each other.
  int64_t AsInt() const;
  double AsReal() const;
  const std::string& AsText() const;  // "" unless TEXT

 private:
  Type type_ = Type::kNull;
  int64_t i_ = 0;
  double d_ = 0;
  std::string s_;
};

struct Statement {
  std::string sql;
  std::vector<SqlValue> params;
};

// Executed atomically, statements in order.
struct Batch {
  std::vector<Statement> statements;
  Batch& Add(std::string sql, std::vector<SqlValue> params = {}) {
    statements.push_back({std::move(sql), std::move(params)});
    return *this;
  }
  // True unless every statement only reads: the shell runs a batch that writes on the writer
  // (BEGIN IMMEDIATE, group commit) and one that does not on a read-only connection, without
  // preparing the SQL to find out. Known from the core's own SQL: a statement reads only when
  // it starts with SELECT or VALUES, or with WITH and names no INSERT/UPDATE/DELETE/REPLACE;
  // anything else counts as a write (a wrong "writes" costs a little speed, never correctness).
  bool writes() const;
};
// The rule of Batch::writes() for one statement.
bool StatementWrites(const std::string& sql);

// Rows of one statement (empty for statements that return nothing).
struct Rows {
  std::vector<std::string> columns;
  std::vector<std::vector<SqlValue>> rows;
  bool empty() const { return rows.empty(); }
  // Index of a column by name, or -1.
  int Column(const std::string& name) const;
  // Value at (row, column name); NULL if either is missing.
  const SqlValue& Get(size_t row, const std::string& column) const;
};

// Outcome of one Batch. status: ok; kConflict for a constraint violation (UNIQUE, CHECK,
// PRIMARY KEY) — the batch was rolled back; kUnavailable when the database was busy past its
// timeout; kInternal otherwise. results has one entry per statement when ok.
struct BatchResult {
  Status status;
  std::vector<Rows> results;
};

// Synchronous executor, for native shells and tests (the edge shell drives plans itself).
class SqlExecutor {
 public:
  virtual ~SqlExecutor() = default;
  virtual BatchResult Execute(const Batch& batch) = 0;
};

}  // namespace gleaner::core
