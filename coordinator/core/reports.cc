// GET /v1/reports/cost?group_by=job|node|gpu|day&format=json|csv&from=&to= (operator).
// Segments started in [from, to) are costed one by one (cost.h) and summed per group; the
// totals are the sums of the groups, so the figures reconcile exactly with the segments.
#include <cstdio>
#include <map>

#include "coordinator/core/cost.h"
#include "coordinator/core/routes.h"

namespace gleaner::core {
namespace {

Json FiguresJson(const CostFigures& c) {
  double per_step = c.CostPerStep();
  return {{"segments", c.segments},
          {"steps", c.steps},
          {"billable_seconds", c.billable_seconds},
          {"cost_usd", c.cost_usd},
          {"cost_per_step", per_step < 0 ? Json(nullptr) : Json(per_step)},
          {"wasted_seconds", c.wasted_seconds},
          {"wasted_cost_usd", c.wasted_cost_usd}};
}

std::string Num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.12g", v);
  return buf;
}

std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out.push_back('"');
    out.push_back(c);
  }
  return out + "\"";
}

std::string CsvRow(const std::string& key, const CostFigures& c) {
  double per_step = c.CostPerStep();
  return CsvField(key) + "," + std::to_string(c.segments) + "," + std::to_string(c.steps) + "," +
         Num(c.billable_seconds) + "," + Num(c.cost_usd) + "," +
         (per_step < 0 ? std::string() : Num(per_step)) + "," + Num(c.wasted_seconds) + "," +
         Num(c.wasted_cost_usd) + "\n";
}

}  // namespace

Plan HandleCostReport(CtxPtr ctx) {
  QueryParams q(ctx->req.query);
  std::string group_by = "job", format = "json", from_s, to_s;
  q.Get("group_by", &group_by);
  q.Get("format", &format);
  if (group_by != "job" && group_by != "node" && group_by != "gpu" && group_by != "day") {
    return Plan::Fail(Status::Invalid("group_by must be one of: job, node, gpu, day"));
  }
  if (format != "json" && format != "csv") {
    return Plan::Fail(Status::Invalid("format must be json or csv"));
  }
  int64_t from = 0, to = int64_t(1) << 53;
  if (q.Get("from", &from_s) && !ParseTime(from_s, &from)) {
    return Plan::Fail(Status::Invalid("from must be an RFC 3339 time, a date or Unix seconds"));
  }
  if (q.Get("to", &to_s) && !ParseTime(to_s, &to)) {
    return Plan::Fail(Status::Invalid("to must be an RFC 3339 time, a date or Unix seconds"));
  }
  Batch b;
  b.Add(
      "SELECT job_id, node_id, gpu_name, started_at, heartbeats, heartbeat_interval_s, "
      "usd_per_hour, step_start, step_end, step_committed, ended_at, end_reason FROM segments "
      "WHERE started_at >= ? AND started_at < ? ORDER BY started_at, job_id, epoch",
      {from, to});
  return Plan::Run(
      std::move(b), [group_by, format, from, to, from_s, to_s](BatchResult res) -> Plan {
        if (!res.status.ok()) return DbFail(res.status);
        const Rows& rows = res.results[0];
        std::map<std::string, CostFigures> groups;
        CostFigures total;
        for (size_t i = 0; i < rows.rows.size(); ++i) {
          auto get = [&](const char* c) -> const SqlValue& { return rows.Get(i, c); };
          SegmentFacts f;
          f.heartbeats = get("heartbeats").AsInt();
          f.heartbeat_interval_s = get("heartbeat_interval_s").AsReal();
          f.usd_per_hour = get("usd_per_hour").AsReal();
          f.step_start = get("step_start").AsInt();
          f.step_end = get("step_end").AsInt();
          f.step_committed = get("step_committed").AsInt();
          f.ended_unfinished =
              !get("ended_at").is_null() && get("end_reason").AsText() != "completed";
          std::string key = group_by == "job"    ? get("job_id").AsText()
                            : group_by == "node" ? get("node_id").AsText()
                            : group_by == "gpu"
                                ? get("gpu_name").AsText()
                                : FormatTime(get("started_at").AsInt()).substr(0, 10);
          groups[key].Add(SegmentCost(f));
        }
        for (const auto& [key, figures] : groups) total.Add(figures);
        if (format == "csv") {
          std::string csv =
              "group,segments,steps,billable_seconds,cost_usd,cost_per_step,"
              "wasted_seconds,wasted_cost_usd\n";
          for (const auto& [key, figures] : groups) csv += CsvRow(key, figures);
          csv += CsvRow("total", total);
          HttpResponse resp;
          resp.status = 200;
          resp.content_type = "text/csv; charset=utf-8";
          resp.body = std::move(csv);
          return Plan::Respond(std::move(resp));
        }
        Json list = Json::array();
        for (const auto& [key, figures] : groups) {
          Json g = FiguresJson(figures);
          g["key"] = key;
          list.push_back(std::move(g));
        }
        return RespondJson(200, {{"group_by", group_by},
                                 {"from", from_s.empty() ? Json(nullptr) : Json(FormatTime(from))},
                                 {"to", to_s.empty() ? Json(nullptr) : Json(FormatTime(to))},
                                 {"groups", list},
                                 {"totals", FiguresJson(total)}});
      });
}

}  // namespace gleaner::core
