#include "coordinator/core/migrations.h"

#include <cctype>

namespace gleaner::core {
namespace {

// Lowercase copy of the statement's first words, single-spaced ("create temp trigger x ...").
std::string Head(const std::string& stmt, size_t words) {
  std::string out;
  for (char c : stmt) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      if (out.empty() || out.back() == ' ') continue;
      if (--words == 0) break;
      out.push_back(' ');
    } else {
      out.push_back(char(std::tolower(static_cast<unsigned char>(c))));
    }
  }
  return out;
}

// A CREATE TRIGGER's body holds ';'-terminated statements of its own; it ends at "END".
bool InsideTriggerBody(const std::string& current) {
  size_t first = current.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return false;
  std::string head = Head(current.substr(first), 3);
  if (head.rfind("create trigger", 0) != 0 && head.rfind("create temp trigger", 0) != 0 &&
      head.rfind("create temporary trigger", 0) != 0) {
    return false;
  }
  size_t last = current.find_last_not_of(" \t\r\n");
  if (last < 2) return true;
  std::string tail = current.substr(last - 2, 3);
  for (char& c : tail) c = char(std::tolower(static_cast<unsigned char>(c)));
  bool word_start = last < 3 || !(std::isalnum(static_cast<unsigned char>(current[last - 3])) ||
                                  current[last - 3] == '_');
  return !(tail == "end" && word_start);
}

}  // namespace

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
    if (c == ';' && !in_string && !InsideTriggerBody(current)) {
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
