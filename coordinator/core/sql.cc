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

}  // namespace gleaner::core
