// One maintenance tick (the shell's timer, or POST /v1/admin/maintenance for operators):
//  1. close the segments of expired leases (end_reason 'stalled'); the jobs stay 'running' with
//     an expired lease, which is exactly what the claim picks first;
//  2. quarantine nodes with quarantine_failures failed jobs within quarantine_window_s;
//  3. record the autoscaler target clamp(running + pending, min, max) in scaling_events.
// One batch; the response is a JSON summary.
#include "coordinator/core/routes.h"

namespace gleaner::core {

Plan MaintenanceTick(const CoreConfig* config, int64_t now_ms) {
  const CoreConfig& c = *config;
  std::string why = std::to_string(c.quarantine_failures) + " failed jobs within " +
                    std::to_string(int64_t(c.quarantine_window_s)) + " s";
  Batch b;
  b.Add("UPDATE segments SET ended_at = COALESCE(last_heartbeat_at, started_at), "
        "end_reason = 'stalled' WHERE ended_at IS NULL AND EXISTS (SELECT 1 FROM jobs j WHERE "
        "j.id = segments.job_id AND j.lease_epoch = segments.epoch AND j.state = 'running' AND "
        "j.lease_expires_at < ?) RETURNING job_id, epoch, node_id",
        {now_ms});
  b.Add("UPDATE nodes SET state = 'quarantined', state_reason = ?, state_changed_at = ? "
        "WHERE state = 'active' AND (SELECT count(*) FROM job_bans b WHERE b.node_id = nodes.id "
        "AND b.at > MAX(?, COALESCE(nodes.state_changed_at, -1))) >= ? RETURNING id",
        {why, now_ms, now_ms - int64_t(c.quarantine_window_s * 1000),
         int64_t(c.quarantine_failures)});
  // current: active nodes seen (claim or heartbeat) within stall_after, the fleet as the
  // coordinator sees it.
  b.Add("INSERT INTO scaling_events (at, running, pending, current, target, min_nodes, "
        "max_nodes, note) "
        "SELECT ?1, r, p, n, MIN(MAX(r + p, ?2), ?3), ?2, ?3, 'maintenance' FROM (SELECT "
        "(SELECT count(*) FROM jobs WHERE state = 'running') AS r, "
        "(SELECT count(*) FROM jobs WHERE state = 'pending') AS p, "
        "(SELECT count(*) FROM nodes WHERE state = 'active' AND last_seen_at >= ?4) AS n) "
        "RETURNING running, pending, target",
        {now_ms, int64_t(c.autoscale_min), int64_t(c.autoscale_max),
         now_ms - int64_t(c.stall_after_s * 1000)});
  return Plan::Run(std::move(b), [config, now_ms](BatchResult res) -> Plan {
    if (!res.status.ok()) return DbFail(res.status);
    Json stalled = Json::array();
    for (size_t i = 0; i < res.results[0].rows.size(); ++i) {
      const Rows& r = res.results[0];
      stalled.push_back({{"job_id", r.Get(i, "job_id").AsText()},
                         {"epoch", r.Get(i, "epoch").AsInt()},
                         {"node_id", r.Get(i, "node_id").AsText()}});
    }
    Json quarantined = Json::array();
    for (const auto& row : res.results[1].rows) quarantined.push_back(row[0].AsText());
    const Rows& s = res.results[2];
    return RespondJson(200, {{"at", FormatTime(now_ms)},
                             {"stalled", stalled},
                             {"quarantined", quarantined},
                             {"autoscaler",
                              {{"running", s.Get(0, "running").AsInt()},
                               {"pending", s.Get(0, "pending").AsInt()},
                               {"target", s.Get(0, "target").AsInt()},
                               {"min", config->autoscale_min},
                               {"max", config->autoscale_max}}}});
  });
}

Plan HandleMaintenance(CtxPtr ctx) { return MaintenanceTick(ctx->config, ctx->now()); }

}  // namespace gleaner::core
