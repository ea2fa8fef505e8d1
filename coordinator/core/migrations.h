// The numbered schema migrations (coordinator/core/migrations/NNNN_name.sql), embedded at build
// time. Both shells apply exactly these, in order, through Coordinator::MigrationPlan().
#pragma once

#include <string>
#include <vector>

namespace gleaner::core {

struct Migration {
  int version;
  const char* name;
  const char* sql;  // one or more ';'-terminated statements
};

const std::vector<Migration>& Migrations();

// Splits a migration's SQL into single statements (drops comments and blank statements). A
// CREATE TRIGGER stays whole: the ';' inside its BEGIN ... END body do not split it.
std::vector<std::string> SplitSqlStatements(const std::string& sql);

}  // namespace gleaner::core
