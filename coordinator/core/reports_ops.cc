// Operator read routes behind the dashboard's charts, each also as CSV (format=csv):
//   GET /v1/reports/queue          jobs pending/running/completed/failed/canceled over time,
//                                  rebuilt from jobs' timestamps and segments (no snapshots)
//   GET /v1/reports/autoscaler     target vs current from scaling_events
//   GET /v1/reports/cost-per-step  histogram of jobs' cost per step (cost.h figures)
#include <algorithm>
#include <map>

#include "coordinator/core/report_util.h"
#include "coordinator/core/routes.h"

namespace gleaner::core {
namespace {

constexpr int64_t kHourMs = 3600 * 1000;

// Number of values <= t in a sorted vector.
int64_t CountUpTo(const std::vector<int64_t>& sorted, int64_t t) {
  return int64_t(std::upper_bound(sorted.begin(), sorted.end(), t) - sorted.begin());
}

bool ReadInt(const QueryParams& q, const char* name, int64_t lo, int64_t hi, int64_t* out) {
  std::string s;
  if (!q.Get(name, &s)) return true;
  if (s.empty() || s.size() > 9) return false;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  if (v < lo || v > hi) return false;
  *out = v;
  return true;
}

// Queue over [from, to] at `points` evenly spaced times (the last one is `to`). Counting:
//   running(t)  = leases open at t (segments started <= t and not ended by t)
//   completed/failed/canceled(t) = jobs in that final state whose finished_at <= t
//   pending(t)  = jobs created by t, not finished by t, not running at t (this includes a job
//                 whose lease stalled or was released and that waits for its next lease)
Plan QueueSeries(bool csv, Window w, int64_t points) {
  Batch b;
  b.Add("SELECT state, count(*) AS n FROM jobs WHERE finished_at < ? GROUP BY state", {w.from});
  b.Add(
      "SELECT state, created_at, finished_at FROM jobs WHERE created_at <= ? AND "
      "(finished_at IS NULL OR finished_at >= ?)",
      {w.to, w.from});
  b.Add(
      "SELECT started_at, ended_at FROM segments WHERE started_at <= ? AND "
      "(ended_at IS NULL OR ended_at >= ?)",
      {w.to, w.from});
  return Plan::Run(std::move(b), [csv, w, points](BatchResult res) -> Plan {
    if (!res.status.ok()) return DbFail(res.status);
    std::map<std::string, int64_t> base;
    for (const auto& row : res.results[0].rows) base[row[0].AsText()] = row[1].AsInt();
    std::vector<int64_t> created, finished;
    std::map<std::string, std::vector<int64_t>> finished_by;
    const Rows& jobs = res.results[1];
    for (size_t i = 0; i < jobs.rows.size(); ++i) {
      created.push_back(jobs.Get(i, "created_at").AsInt());
      const SqlValue& fin = jobs.Get(i, "finished_at");
      if (fin.is_null()) continue;
      finished.push_back(fin.AsInt());
      finished_by[jobs.Get(i, "state").AsText()].push_back(fin.AsInt());
    }
    std::vector<int64_t> starts, ends;
    for (const auto& row : res.results[2].rows) {
      starts.push_back(row[0].AsInt());
      if (!row[1].is_null()) ends.push_back(row[1].AsInt());
    }
    for (auto* v : {&created, &finished, &starts, &ends}) std::sort(v->begin(), v->end());
    for (auto& [state, v] : finished_by) std::sort(v.begin(), v.end());
    const char* kFinal[] = {"completed", "failed", "canceled"};
    Json list = Json::array();
    std::string text = "at,pending,running,completed,failed,canceled\n";
    for (int64_t i = 0; i < points; ++i) {
      int64_t t = w.from + (w.to - w.from) * i / (points - 1);
      int64_t running = CountUpTo(starts, t) - CountUpTo(ends, t);
      int64_t pending = CountUpTo(created, t) - CountUpTo(finished, t) - running;
      Json p = {
          {"at", FormatTime(t)}, {"pending", std::max<int64_t>(0, pending)}, {"running", running}};
      for (const char* s : kFinal) p[s] = base[s] + CountUpTo(finished_by[s], t);
      text += FormatTime(t) + "," + std::to_string(p["pending"].get<int64_t>()) + "," +
              std::to_string(running);
      for (const char* s : kFinal) text += "," + std::to_string(p[s].get<int64_t>());
      text += "\n";
      list.push_back(std::move(p));
    }
    if (csv) return RespondCsv(std::move(text));
    return RespondJson(200, {{"from", FormatTime(w.from)},
                             {"to", FormatTime(w.to)},
                             {"step_s", double(w.to - w.from) / double(points - 1) / 1000.0},
                             {"points", list}});
  });
}

}  // namespace

// GET /v1/reports/queue?from=&to=&points=&format= (operator). Defaults: to = now, from = the
// first job's creation (at most 30 days back; one hour back when there is no job), 120 points.
Plan HandleQueueReport(CtxPtr ctx) {
  QueryParams q(ctx->req.query);
  bool csv = false;
  if (!ParseFormat(q, &csv)) return Plan::Fail(Status::Invalid("format must be json or csv"));
  int64_t points = 120;
  if (!ReadInt(q, "points", 2, 1000, &points)) {
    return Plan::Fail(Status::Invalid("points must be an integer in [2, 1000]"));
  }
  const int64_t now = ctx->now();
  Window w;
  Status st = ParseWindow(q, 0, std::max(now, int64_t(1)), &w);
  if (!st.ok()) return Plan::Fail(st);
  if (w.from_set) return QueueSeries(csv, w, points);
  Batch first;
  first.Add("SELECT MIN(created_at) AS first FROM jobs WHERE created_at < ?", {w.to});
  return Plan::Run(std::move(first), [csv, w, points](BatchResult res) mutable -> Plan {
    if (!res.status.ok()) return DbFail(res.status);
    const SqlValue& first = res.results[0].Get(0, "first");
    w.from = first.is_null() ? w.to - kHourMs : std::max(first.AsInt(), w.to - 30 * 24 * kHourMs);
    if (w.from >= w.to) w.from = w.to - 1000;
    return QueueSeries(csv, w, points);
  });
}

// GET /v1/reports/autoscaler?from=&to=&limit=&format= (operator): the newest `limit` (default
// 500, at most 5000) maintenance decisions in [from, to), oldest first.
Plan HandleAutoscalerReport(CtxPtr ctx) {
  QueryParams q(ctx->req.query);
  bool csv = false;
  if (!ParseFormat(q, &csv)) return Plan::Fail(Status::Invalid("format must be json or csv"));
  int64_t limit = 500;
  if (!ReadInt(q, "limit", 1, 5000, &limit)) {
    return Plan::Fail(Status::Invalid("limit must be an integer in [1, 5000]"));
  }
  Window w;
  Status st = ParseWindow(q, 0, int64_t(1) << 53, &w);
  if (!st.ok()) return Plan::Fail(st);
  Batch b;
  b.Add(
      "SELECT at, running, pending, current, target, min_nodes, max_nodes, provider FROM "
      "scaling_events WHERE at >= ? AND at < ? ORDER BY at DESC, id DESC LIMIT ?",
      {w.from, w.to, limit});
  return Plan::Run(std::move(b), [csv](BatchResult res) -> Plan {
    if (!res.status.ok()) return DbFail(res.status);
    const Rows& r = res.results[0];
    Json list = Json::array();
    std::string text = "at,running,pending,current,target,min,max\n";
    for (size_t k = r.rows.size(); k-- > 0;) {
      auto get = [&](const char* c) -> const SqlValue& { return r.Get(k, c); };
      Json current = get("current").is_null() ? Json(nullptr) : Json(get("current").AsInt());
      list.push_back({{"at", FormatTime(get("at").AsInt())},
                      {"running", get("running").AsInt()},
                      {"pending", get("pending").AsInt()},
                      {"current", current},
                      {"target", get("target").AsInt()},
                      {"min", get("min_nodes").AsInt()},
                      {"max", get("max_nodes").AsInt()}});
      text += FormatTime(get("at").AsInt()) + "," + std::to_string(get("running").AsInt()) + "," +
              std::to_string(get("pending").AsInt()) + "," +
              (current.is_null() ? std::string() : std::to_string(get("current").AsInt())) + "," +
              std::to_string(get("target").AsInt()) + "," +
              std::to_string(get("min_nodes").AsInt()) + "," +
              std::to_string(get("max_nodes").AsInt()) + "\n";
    }
    if (csv) return RespondCsv(std::move(text));
    return RespondJson(200, {{"events", list}});
  });
}

// GET /v1/reports/cost-per-step?from=&to=&bins=&format= (operator): each job's cost per step
// over its segments started in [from, to) (jobs that trained no step are left out), in `bins`
// (default 20, 1..200) equal-width bins from the smallest to the largest value.
Plan HandleCostPerStepReport(CtxPtr ctx) {
  QueryParams q(ctx->req.query);
  bool csv = false;
  if (!ParseFormat(q, &csv)) return Plan::Fail(Status::Invalid("format must be json or csv"));
  int64_t bins = 20;
  if (!ReadInt(q, "bins", 1, 200, &bins)) {
    return Plan::Fail(Status::Invalid("bins must be an integer in [1, 200]"));
  }
  Window w;
  Status st = ParseWindow(q, 0, int64_t(1) << 53, &w);
  if (!st.ok()) return Plan::Fail(st);
  Batch b;
  AddSegmentQuery(&b, w.from, w.to);
  return Plan::Run(std::move(b), [csv, bins](BatchResult res) -> Plan {
    if (!res.status.ok()) return DbFail(res.status);
    std::map<std::string, CostFigures> jobs;
    for (const SegmentRow& s : ReadSegments(res.results[0]))
      jobs[s.job_id].Add(SegmentCost(s.facts));
    std::vector<double> values;
    for (const auto& [id, c] : jobs) {
      if (c.steps > 0) values.push_back(c.CostPerStep());
    }
    std::vector<int64_t> counts(size_t(bins), 0);
    double lo = 0, hi = 0;
    if (!values.empty()) {
      lo = *std::min_element(values.begin(), values.end());
      hi = *std::max_element(values.begin(), values.end());
      for (double v : values) {
        int64_t k = hi > lo ? int64_t((v - lo) / (hi - lo) * double(bins)) : 0;
        counts[size_t(std::min(k, bins - 1))]++;
      }
    }
    const double width = (hi - lo) / double(bins);
    Json list = Json::array();
    std::string text = "lo,hi,jobs\n";
    for (int64_t k = 0; k < bins; ++k) {
      double a = lo + width * double(k), z = k == bins - 1 ? hi : lo + width * double(k + 1);
      list.push_back({{"lo", a}, {"hi", z}, {"jobs", counts[size_t(k)]}});
      text += Num(a) + "," + Num(z) + "," + std::to_string(counts[size_t(k)]) + "\n";
    }
    if (csv) return RespondCsv(std::move(text));
    return RespondJson(200, {{"jobs", int64_t(values.size())},
                             {"min", values.empty() ? Json(nullptr) : Json(lo)},
                             {"max", values.empty() ? Json(nullptr) : Json(hi)},
                             {"bins", list}});
  });
}

}  // namespace gleaner::core
