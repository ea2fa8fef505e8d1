// GET /metrics (operator): the database's view in the Prometheus text format (version 0.0.4).
// Gauges only, all from one read batch, so both shells serve the same figures; the native shell
// appends its process-local counters and histograms (coordinator/native/metrics.h).
#include "coordinator/core/report_util.h"
#include "coordinator/core/routes.h"

namespace gleaner::core {
namespace {

void Family(std::string* out, const char* name, const char* type, const char* help) {
  *out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

// A label value in the text format: backslash, double quote and newline escaped.
std::string Label(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

}  // namespace

Plan HandleMetrics(CtxPtr ctx) {
  const int64_t now = ctx->now();
  const int64_t alive_since = now - int64_t(ctx->config->stall_after_s * 1000);
  Batch b;
  b.Add("SELECT state, count(*) AS n FROM jobs GROUP BY state");
  b.Add("SELECT count(*) AS n FROM jobs WHERE state = 'running' AND lease_expires_at < ?", {now});
  b.Add("SELECT state, count(*) AS n, SUM(last_seen_at >= ?) AS alive FROM nodes GROUP BY state",
        {alive_since});
  b.Add("SELECT target, current, at FROM scaling_events ORDER BY id DESC LIMIT 1");
  b.Add("SELECT count(*) AS n, COALESCE(SUM(size), 0) AS bytes FROM blobs");
  b.Add(
      "SELECT COALESCE(SUM(heartbeats * heartbeat_interval_s), 0) AS billable, "
      "COALESCE(SUM(heartbeats * heartbeat_interval_s * usd_per_hour / 3600.0), 0) AS usd, "
      "COALESCE(SUM(MAX(step_end - step_start, 0)), 0) AS steps, count(*) AS segments "
      "FROM segments");
  // 6, 7: judged replays per device (the trainer's GPU model) and outcome; reopened jobs.
  b.Add(
      "SELECT COALESCE(trainer_gpu, 'unknown') AS device, CASE WHEN verdict IN ('agree', "
      "'verifier_bad') THEN 'verified' WHEN verdict = 'unverifiable' THEN 'unverifiable' ELSE "
      "'disagreed' END AS outcome, count(*) AS n FROM verifications WHERE state = 'done' GROUP "
      "BY 1, 2 ORDER BY 1, 2");
  b.Add("SELECT count(DISTINCT job_id) AS n FROM job_reopens");
  return Plan::Run(std::move(b), [](BatchResult res) -> Plan {
    if (!res.status.ok()) return DbFail(res.status);
    std::string out;
    Family(&out, "gleaner_jobs", "gauge", "Jobs by state.");
    for (const char* state :
         {"pending", "running", "verifying", "completed", "failed", "canceled"}) {
      int64_t n = 0;
      for (const auto& row : res.results[0].rows) {
        if (row[0].AsText() == state) n = row[1].AsInt();
      }
      out += std::string("gleaner_jobs{state=\"") + state + "\"} " + std::to_string(n) + "\n";
    }
    Family(&out, "gleaner_jobs_stalled", "gauge", "Running jobs whose lease has expired.");
    out += "gleaner_jobs_stalled " + std::to_string(res.results[1].Get(0, "n").AsInt()) + "\n";
    Family(&out, "gleaner_nodes", "gauge", "Registered nodes by state.");
    int64_t alive = 0;
    for (const char* state : {"active", "quarantined"}) {
      int64_t n = 0;
      for (size_t i = 0; i < res.results[2].rows.size(); ++i) {
        if (res.results[2].Get(i, "state").AsText() != state) continue;
        n = res.results[2].Get(i, "n").AsInt();
        if (std::string(state) == "active") alive = res.results[2].Get(i, "alive").AsInt();
      }
      out += std::string("gleaner_nodes{state=\"") + state + "\"} " + std::to_string(n) + "\n";
    }
    Family(&out, "gleaner_nodes_alive", "gauge",
           "Active nodes seen within stall_after (claims and heartbeats).");
    out += "gleaner_nodes_alive " + std::to_string(alive) + "\n";
    const Rows& scale = res.results[3];
    if (!scale.empty()) {
      Family(&out, "gleaner_autoscaler_target", "gauge", "Latest autoscaler target (nodes).");
      out += "gleaner_autoscaler_target " + std::to_string(scale.Get(0, "target").AsInt()) + "\n";
      if (!scale.Get(0, "current").is_null()) {
        Family(&out, "gleaner_autoscaler_current", "gauge",
               "Nodes counted by the latest autoscaler decision.");
        out +=
            "gleaner_autoscaler_current " + std::to_string(scale.Get(0, "current").AsInt()) + "\n";
      }
    }
    Family(&out, "gleaner_blobs", "gauge", "Objects recorded in the blob store.");
    out += "gleaner_blobs " + std::to_string(res.results[4].Get(0, "n").AsInt()) + "\n";
    Family(&out, "gleaner_blob_bytes", "gauge", "Bytes of the objects in the blob store.");
    out += "gleaner_blob_bytes " + std::to_string(res.results[4].Get(0, "bytes").AsInt()) + "\n";
    const Rows& seg = res.results[5];
    Family(&out, "gleaner_segments", "gauge", "Leases ever opened (billing records).");
    out += "gleaner_segments " + std::to_string(seg.Get(0, "segments").AsInt()) + "\n";
    Family(&out, "gleaner_steps_trained", "gauge", "Training steps reported over all leases.");
    out += "gleaner_steps_trained " + std::to_string(seg.Get(0, "steps").AsInt()) + "\n";
    Family(&out, "gleaner_billable_seconds", "gauge", "Billable seconds over all leases.");
    out += "gleaner_billable_seconds " + Num(seg.Get(0, "billable").AsReal()) + "\n";
    Family(&out, "gleaner_cost_usd", "gauge", "Cost over all leases, USD.");
    out += "gleaner_cost_usd " + Num(seg.Get(0, "usd").AsReal()) + "\n";
    Family(&out, "gleaner_verifications", "gauge",
           "Judged replays by the trainer's device and outcome (verified, disagreed, "
           "unverifiable).");
    const Rows& ver = res.results[6];
    for (size_t i = 0; i < ver.rows.size(); ++i) {
      out += "gleaner_verifications{device=\"" + Label(ver.Get(i, "device").AsText()) +
             "\",outcome=\"" + ver.Get(i, "outcome").AsText() + "\"} " +
             std::to_string(ver.Get(i, "n").AsInt()) + "\n";
    }
    Family(&out, "gleaner_jobs_reopened", "gauge",
           "Jobs sent back to the queue after delivery because a node in their lineage forged.");
    out += "gleaner_jobs_reopened " + std::to_string(res.results[7].Get(0, "n").AsInt()) + "\n";
    HttpResponse resp;
    resp.status = 200;
    resp.content_type = "text/plain; version=0.0.4; charset=utf-8";
    resp.body = std::move(out);
    return Plan::Respond(std::move(resp));
  });
}

}  // namespace gleaner::core
