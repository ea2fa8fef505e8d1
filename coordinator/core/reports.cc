// GET /v1/reports/cost?group_by=job|node|gpu|day&format=json|csv&from=&to= (operator).
// Segments started in [from, to) are costed one by one (cost.h) and summed per group; the
// totals are the sums of the groups, so the figures reconcile exactly with the segments.
// Queue time: each segment carries the wait that ended with it (report_util.h: from job creation
// to the first lease, or from the end of the previous lease to this one); a group's median and
// p95 (nearest rank) are over the waits of its segments. Verification (replays that ended in the
// window, grouped by job, verifying node, its GPU and the day they ended) is billed apart: it is
// not part of cost_usd; its outcomes are counted (verified, disagreed, unverifiable).
#include <map>

#include "coordinator/core/job_view.h"
#include "coordinator/core/report_util.h"
#include "coordinator/core/routes.h"

namespace gleaner::core {
namespace {

struct Group {
  CostFigures cost;
  std::vector<double> waits;
  double verification_seconds = 0, verification_cost_usd = 0;
  // Judged replays: verified (agreed), disagreed (found bad or a round 2), unverifiable.
  int64_t verified = 0, disagreed = 0, unverifiable = 0;
  void Add(const Group& o) {
    cost.Add(o.cost);
    verified += o.verified;
    disagreed += o.disagreed;
    unverifiable += o.unverifiable;
    verification_seconds += o.verification_seconds;
    verification_cost_usd += o.verification_cost_usd;
    waits.insert(waits.end(), o.waits.begin(), o.waits.end());
  }
};

Json OrNull(double v) {
  return v < 0 ? Json(nullptr) : Json(v);
}

Json GroupJson(const Group& g) {
  const CostFigures& c = g.cost;
  return {
      {"segments", c.segments},
      {"steps", c.steps},
      {"billable_seconds", c.billable_seconds},
      {"cost_usd", c.cost_usd},
      {"cost_per_step", OrNull(c.CostPerStep())},
      {"wasted_seconds", c.wasted_seconds},
      {"wasted_cost_usd", c.wasted_cost_usd},
      {"sampling_seconds", c.sampling_seconds},
      {"sampling_cost_usd", c.sampling_cost_usd},
      {"queue_wait_median_s", OrNull(Percentile(g.waits, 50))},
      {"queue_wait_p95_s", OrNull(Percentile(g.waits, 95))},
      {"verification_seconds", g.verification_seconds},
      {"verification_cost_usd", g.verification_cost_usd},
      {"verifications",
       {{"verified", g.verified}, {"disagreed", g.disagreed}, {"unverifiable", g.unverifiable}}}};
}

std::string CsvCell(double v) {
  return v < 0 ? std::string() : Num(v);
}

std::string CsvRow(const std::string& key, const Group& g) {
  const CostFigures& c = g.cost;
  return CsvField(key) + "," + std::to_string(c.segments) + "," + std::to_string(c.steps) + "," +
         Num(c.billable_seconds) + "," + Num(c.cost_usd) + "," + CsvCell(c.CostPerStep()) + "," +
         Num(c.wasted_seconds) + "," + Num(c.wasted_cost_usd) + "," +
         CsvCell(Percentile(g.waits, 50)) + "," + CsvCell(Percentile(g.waits, 95)) + "," +
         Num(c.sampling_seconds) + "," + Num(c.sampling_cost_usd) + "," +
         Num(g.verification_seconds) + "," + Num(g.verification_cost_usd) + "\n";
}

}  // namespace

Plan HandleCostReport(CtxPtr ctx) {
  QueryParams q(ctx->req.query);
  std::string group_by = "job";
  q.Get("group_by", &group_by);
  if (group_by != "job" && group_by != "node" && group_by != "gpu" && group_by != "day") {
    return Plan::Fail(Status::Invalid("group_by must be one of: job, node, gpu, day"));
  }
  bool csv = false;
  if (!ParseFormat(q, &csv)) return Plan::Fail(Status::Invalid("format must be json or csv"));
  Window w;
  Status st = ParseWindow(q, 0, int64_t(1) << 53, &w);
  if (!st.ok()) return Plan::Fail(st);
  Batch b;
  AddSegmentQuery(&b, w.from, w.to);
  // An unverifiable replay had no verifier: it counts under its trainer and the trainer's GPU.
  b.Add(std::string("SELECT v.job_id, COALESCE(v.node_id, v.trainer_node) AS node_id, "
                    "COALESCE(v.gpu_name, v.trainer_gpu, '') AS gpu_name, v.ended_at, "
                    "v.billed_ms, v.verdict, ") +
            kVerificationCostSql +
            " AS cost_usd FROM verifications v WHERE v.state = 'done' AND v.ended_at >= ? AND "
            "v.ended_at < ?",
        {w.from, w.to});
  return Plan::Run(std::move(b), [group_by, csv, w](BatchResult res) -> Plan {
    if (!res.status.ok()) return DbFail(res.status);
    std::map<std::string, Group> groups;
    for (const SegmentRow& s : ReadSegments(res.results[0])) {
      std::string key = group_by == "job"    ? s.job_id
                        : group_by == "node" ? s.node_id
                        : group_by == "gpu"  ? s.gpu_name
                                             : FormatTime(s.started_at).substr(0, 10);
      Group& g = groups[key];
      g.cost.Add(SegmentCost(s.facts));
      g.waits.push_back(s.queue_wait_s);
    }
    const Rows& v = res.results[1];
    for (size_t i = 0; i < v.rows.size(); ++i) {
      std::string key = group_by == "job"    ? v.Get(i, "job_id").AsText()
                        : group_by == "node" ? v.Get(i, "node_id").AsText()
                        : group_by == "gpu"
                            ? v.Get(i, "gpu_name").AsText()
                            : FormatTime(v.Get(i, "ended_at").AsInt()).substr(0, 10);
      Group& g = groups[key];
      g.verification_seconds += double(v.Get(i, "billed_ms").AsInt()) / 1000.0;
      g.verification_cost_usd += v.Get(i, "cost_usd").AsReal();
      const std::string verdict = v.Get(i, "verdict").AsText();
      if (verdict == "agree" || verdict == "verifier_bad") {
        ++g.verified;
      } else if (verdict == "unverifiable") {
        ++g.unverifiable;
      } else {
        ++g.disagreed;
      }
    }
    Group total;
    for (const auto& [key, g] : groups) total.Add(g);
    if (csv) {
      std::string text =
          "group,segments,steps,billable_seconds,cost_usd,cost_per_step,"
          "wasted_seconds,wasted_cost_usd,queue_wait_median_s,queue_wait_p95_s,sampling_seconds,"
          "sampling_cost_usd,verification_seconds,verification_cost_usd\n";
      for (const auto& [key, g] : groups) text += CsvRow(key, g);
      text += CsvRow("total", total);
      return RespondCsv(std::move(text));
    }
    Json list = Json::array();
    for (const auto& [key, g] : groups) {
      Json j = GroupJson(g);
      j["key"] = key;
      list.push_back(std::move(j));
    }
    return RespondJson(200, {{"group_by", group_by},
                             {"from", w.from_set ? Json(FormatTime(w.from)) : Json(nullptr)},
                             {"to", w.to_set ? Json(FormatTime(w.to)) : Json(nullptr)},
                             {"groups", list},
                             {"totals", GroupJson(total)}});
  });
}

}  // namespace gleaner::core
