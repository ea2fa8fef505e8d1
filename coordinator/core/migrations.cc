#include "coordinator/core/migrations.h"

namespace gleaner::core {

std::vector<std::string> SplitSqlStatements(const std::string& sql) {
  std::vector<std::string> out;
  std::string current;
  bool in_string = false;
  for (size_t i = 0; i < sql.size(); ++i) {
    char c = sql[i];
    if (!in_string && c == '-' && i + 1 < sql.size() && sql[i + 1] == '-') {
      while (i < sql.size() && sql[i] != '\n') ++i;
      current.push_back('\n');
      continue;
    }
    if (c == '\'') in_string = !in_string;
    if (c == ';' && !in_string) {
      size_t first = current.find_first_not_of(" \t\r\n");
      if (first != std::string::npos) out.push_back(current.substr(first));
      current.clear();
      continue;
    }
    current.push_back(c);
  }
  size_t first = current.find_first_not_of(" \t\r\n");
  if (first != std::string::npos) out.push_back(current.substr(first));
  return out;
}

}  // namespace gleaner::core
