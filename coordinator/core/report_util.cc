#include "coordinator/core/report_util.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace gleaner::core {

Status ParseWindow(const QueryParams& q, int64_t default_from, int64_t default_to, Window* w) {
  std::string from_s, to_s;
  w->from = default_from;
  w->to = default_to;
  w->from_set = q.Get("from", &from_s);
  w->to_set = q.Get("to", &to_s);
  if (w->from_set && !ParseTime(from_s, &w->from)) {
    return Status::Invalid("from must be an RFC 3339 time, a date or Unix seconds");
  }
  if (w->to_set && !ParseTime(to_s, &w->to)) {
    return Status::Invalid("to must be an RFC 3339 time, a date or Unix seconds");
  }
  if (w->from >= w->to) return Status::Invalid("from must be before to");
  return Status::Ok();
}

bool ParseFormat(const QueryParams& q, bool* csv) {
  std::string format = "json";
  q.Get("format", &format);
  *csv = format == "csv";
  return format == "json" || format == "csv";
}

std::string Num(double v) {
  if (std::isnan(v)) return "NaN";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.12g", v);
  return buf;
}

std::string CsvField(const std::string& text) {
  const bool formula = !text.empty() && std::string("=+-@\t\r").find(text[0]) != std::string::npos;
  const std::string s = formula ? "'" + text : text;
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out.push_back('"');
    out.push_back(c);
  }
  return out + "\"";
}

Plan RespondCsv(std::string csv) {
  HttpResponse resp;
  resp.status = 200;
  resp.content_type = "text/csv; charset=utf-8";
  resp.body = std::move(csv);
  return Plan::Respond(std::move(resp));
}

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return -1;
  std::sort(values.begin(), values.end());
  double rank = std::ceil(p / 100.0 * double(values.size()));
  size_t index = rank < 1 ? 0 : size_t(rank) - 1;
  return values[std::min(index, values.size() - 1)];
}

void AddSegmentQuery(Batch* b, int64_t from, int64_t to) {
  // prev_end: the end of the job's previous lease (every earlier segment is closed before a new
  // claim opens one: the claim batch closes a stalled one itself).
  b->Add(
      "SELECT s.job_id, s.epoch, s.node_id, s.gpu_name, s.started_at, s.ended_at, "
      "s.end_reason, s.heartbeats, s.heartbeat_interval_s, s.usd_per_hour, s.step_start, "
      "s.step_end, s.step_committed, s.sampling_s, j.created_at AS job_created_at, "
      "(SELECT MAX(p.ended_at) FROM segments p WHERE p.job_id = s.job_id AND p.epoch < s.epoch) "
      "AS prev_end FROM segments s JOIN jobs j ON j.id = s.job_id "
      "WHERE s.started_at >= ? AND s.started_at < ? ORDER BY s.started_at, s.job_id, s.epoch",
      {from, to});
}

std::vector<SegmentRow> ReadSegments(const Rows& rows) {
  std::vector<SegmentRow> out;
  out.reserve(rows.rows.size());
  for (size_t i = 0; i < rows.rows.size(); ++i) {
    auto get = [&](const char* c) -> const SqlValue& { return rows.Get(i, c); };
    SegmentRow s;
    s.job_id = get("job_id").AsText();
    s.node_id = get("node_id").AsText();
    s.gpu_name = get("gpu_name").AsText();
    s.end_reason = get("end_reason").AsText();
    s.epoch = get("epoch").AsInt();
    s.started_at = get("started_at").AsInt();
    s.ended_at = get("ended_at").is_null() ? -1 : get("ended_at").AsInt();
    int64_t waited_from =
        get("prev_end").is_null() ? get("job_created_at").AsInt() : get("prev_end").AsInt();
    s.queue_wait_s = double(std::max<int64_t>(0, s.started_at - waited_from)) / 1000.0;
    SegmentFacts& f = s.facts;
    f.heartbeats = get("heartbeats").AsInt();
    f.heartbeat_interval_s = get("heartbeat_interval_s").AsReal();
    f.usd_per_hour = get("usd_per_hour").AsReal();
    f.step_start = get("step_start").AsInt();
    f.step_end = get("step_end").AsInt();
    f.step_committed = get("step_committed").AsInt();
    f.sampling_s = get("sampling_s").AsReal();
    f.ended_unfinished = s.ended_at >= 0 && s.end_reason != "completed";
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace gleaner::core
