#include "coordinator/core/sql.h"

namespace gleaner::core {

int64_t SqlValue::AsInt() const {
  switch (type_) {
    case Type::kInt:
      return i_;
    case Type::kReal:
      return int64_t(d_);
    default:
      return 0;
  }
}

double SqlValue::AsReal() const {
  switch (type_) {
    case Type::kInt:
      return double(i_);
    case Type::kReal:
      return d_;
    default:
      return 0.0;
  }
}

const std::string& SqlValue::AsText() const {
  static const std::string kEmpty;
  return type_ == Type::kText ? s_ : kEmpty;
}

int Rows::Column(const std::string& name) const {
  for (size_t i = 0; i < columns.size(); ++i) {
    if (columns[i] == name) return int(i);
  }
  return -1;
}

const SqlValue& Rows::Get(size_t row, const std::string& column) const {
  static const SqlValue kNull;
  int c = Column(column);
  if (c < 0 || row >= rows.size() || size_t(c) >= rows[row].size()) return kNull;
  return rows[row][size_t(c)];
}

namespace {

// The first `max` upper-cased words of sql outside quotes and comments, in order.
std::vector<std::string> Words(const std::string& sql, size_t max) {
  std::vector<std::string> words;
  std::string word;
  auto flush = [&] {
    if (!word.empty()) words.push_back(std::move(word));
    word.clear();
  };
  for (size_t i = 0; i < sql.size() && words.size() < max; ++i) {
    const char c = sql[i];
    if (c == '\'' || c == '"' || c == '`') {  // a quoted string or name: skip to its end
      flush();
      for (++i; i < sql.size() && sql[i] != c; ++i) {
      }
    } else if (c == '-' && i + 1 < sql.size() && sql[i + 1] == '-') {
      flush();
      while (i < sql.size() && sql[i] != '\n') ++i;
    } else if (c == '/' && i + 1 < sql.size() && sql[i + 1] == '*') {
      flush();
      size_t end = sql.find("*/", i + 2);
      i = end == std::string::npos ? sql.size() : end + 1;
    } else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') {
      word.push_back(c >= 'a' && c <= 'z' ? char(c - 32) : c);
    } else {
      flush();
    }
  }
  if (words.size() < max) flush();
  return words;
}

}  // namespace

bool StatementWrites(const std::string& sql) {
  const std::vector<std::string> first = Words(sql, 1);
  if (first.empty()) return true;
  if (first[0] == "SELECT" || first[0] == "VALUES") return false;
  if (first[0] != "WITH") return true;
  for (const std::string& w : Words(sql, SIZE_MAX)) {
    if (w == "INSERT" || w == "UPDATE" || w == "DELETE" || w == "REPLACE") return true;
  }
  return false;
}

bool Batch::writes() const {
  for (const Statement& s : statements) {
    if (StatementWrites(s.sql)) return true;
  }
  return false;
}

}  // namespace gleaner::core
