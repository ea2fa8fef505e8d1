// Pieces shared by the operator report routes (reports.cc, reports_ops.cc, metrics.cc): the
// time window of a query, CSV text, percentiles, and the segment rows every cost figure comes
// from. Internal to the core.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "coordinator/core/context.h"
#include "coordinator/core/cost.h"

namespace gleaner::core {

// [from, to) in Unix ms from the query's `from` / `to` (RFC 3339, YYYY-MM-DD or Unix seconds).
// Absent bounds take the defaults given. Fails with a 400 status on a malformed bound or
// from >= to.
struct Window {
  int64_t from = 0, to = 0;
  bool from_set = false, to_set = false;
};
Status ParseWindow(const QueryParams& q, int64_t default_from, int64_t default_to, Window* w);

// `format` query parameter: "json" (default) or "csv". False on anything else.
bool ParseFormat(const QueryParams& q, bool* csv);

// A number as CSV/Prometheus text: shortest form up to 12 significant digits.
std::string Num(double v);
// One CSV text field, quoted when it holds a comma, quote or line break. Text that a
// spreadsheet would run as a formula (starting with =, +, -, @, tab or CR) gets a leading '
// (only text goes through here: numbers are written with Num).
std::string CsvField(const std::string& s);
// 200 text/csv response.
Plan RespondCsv(std::string csv);

// Nearest-rank percentile (p in (0, 100]) of values (sorted here); -1 when empty.
double Percentile(std::vector<double> values, double p);

// The columns of one segment as reports need them.
struct SegmentRow {
  std::string job_id, node_id, gpu_name, end_reason;
  int64_t epoch = 0, started_at = 0, ended_at = -1;  // ended_at -1 while open
  // Time the job waited for this lease: from job creation (first lease) or from the end of the
  // previous lease (release, stall, failure) to this lease's start. Seconds.
  double queue_wait_s = 0;
  SegmentFacts facts;
};
// "SELECT … FROM segments s JOIN jobs j …" for segments started in [from, to), ordered by
// started_at, job, epoch; read back with ReadSegments.
void AddSegmentQuery(Batch* b, int64_t from, int64_t to);
std::vector<SegmentRow> ReadSegments(const Rows& rows);

}  // namespace gleaner::core
