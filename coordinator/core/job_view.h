// How a job row becomes API JSON (GET /v1/jobs/{id}, lists, create, cancel).
#pragma once

#include <string>

#include "coordinator/core/sql.h"
#include "shared/json.h"

namespace gleaner::core {

// Column list for "SELECT <kJobColumns> FROM jobs ..." (includes the job's cost so far).
extern const char* const kJobColumns;

// The job at row i of rows (selected with kJobColumns) as API JSON.
Json JobJson(const Rows& rows, size_t i, int64_t now_ms);

// Cost of one segment in USD: heartbeats x interval (billable seconds) x price per hour.
// The SQL expression is the same formula (kSegmentCostSql) so GET /v1/jobs and the report agree.
extern const char* const kSegmentCostSql;
// Cost of one verification (alias v) in USD: the delivering attempt's lease time x price.
extern const char* const kVerificationCostSql;

// Time as RFC 3339, or null for a NULL column.
Json TimeOrNull(const SqlValue& v);

}  // namespace gleaner::core
