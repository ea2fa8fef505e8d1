// One maintenance tick (the shell's timer, or POST /v1/admin/maintenance for operators):
//  1. close the segments of expired leases (end_reason 'stalled'); the jobs stay 'running' with
//     an expired lease, which is exactly what the claim picks first;
//  2. quarantine nodes with quarantine_failures failed jobs within quarantine_window_s (bans
//     on jobs that failed for everyone do not count: attribution.h);
//  3. decide the autoscaler target (autoscaler.h) from the counts read in the same batch (running
//     jobs are counted, which is bounded by the fleet; pending is the active-job counter of
//     migration 0003 minus running, whatever the queue holds) and
//     record it in scaling_events with the pool provider's node count (when it has none: the
//     active nodes seen within stall_after);
//  4. list the machines of nodes quarantined within the window, for the provider to reallocate;
//  5. forget objects nothing refers to once they are blob_gc_grace_s old (up to 1000 a tick):
//     checkpoints not committed (or no longer kept), outputs of a job that is neither pending nor
//     running and does not name them as its result, and upload reservations never stored. The
//     rows go in this batch; the shell deletes the objects afterwards (Plan::blob_deletes);
//  6. void replays no node claimed within blob_gc_grace_s (a fleet without verifying nodes), so
//     the checkpoints they hold back from retention go with the job's next commit;
//  7. collect what leases uploaded and no commit names, once uncommitted_grace_s has passed
//     since its URL was minted (lease_quota.h: checkpoints and sample images never committed,
//     outputs of any job state that neither its result nor a checkpoint of their lease names),
//     in both storage modes: the keys come from lease_objects, not from the store.
//  8. mark unverifiable the replays open longer than verify_max_wait that no active node of the
//     trainer's device (and reproducibility class) could take, and release 'verifying' jobs
//     whose last segment has no open replay left (verification.h).
// Two batches: the changes and counts, then the scaling event. The response is a JSON summary.
#include "coordinator/core/attribution.h"
#include "coordinator/core/autoscaler.h"
#include "coordinator/core/lease_quota.h"
#include "coordinator/core/routes.h"
#include "coordinator/core/verification.h"

namespace gleaner::core {
namespace {

// The job id of a "jobs/<id>/..." key, in SQL.
const char* const kKeyJob = "substr(blobs.key, 6, instr(substr(blobs.key, 6), '/') - 1)";

Plan RecordDecision(const CoreConfig* config, int64_t now_ms, const PoolObservation& pool,
                    Json summary, const AutoscaleInputs& in, std::vector<std::string> deletes,
                    PoolActions actions) {
  AutoscaleDecision d = DecideTarget(in);
  actions.target = d.target;
  Batch b;
  b.Add(
      "INSERT INTO scaling_events (at, running, pending, current, target, min_nodes, max_nodes, "
      "provider, note) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
      {now_ms, in.running, in.pending,
       pool.current >= 0 ? SqlValue(pool.current) : SqlValue::Null(), d.target, in.min_nodes,
       in.max_nodes, pool.provider.empty() ? SqlValue::Null() : SqlValue(pool.provider), d.reason});
  summary["autoscaler"] = {
      {"running", in.running},
      {"pending", in.pending},
      {"warm", in.warm_nodes},
      {"current", pool.current >= 0 ? Json(pool.current) : Json(nullptr)},
      {"provider", pool.provider.empty() ? Json(nullptr) : Json(pool.provider)},
      {"target", d.target},
      {"reason", d.reason},
      {"min", config->autoscale_min},
      {"max", config->autoscale_max}};
  return Plan::Run(std::move(b), [summary, deletes, actions](BatchResult res) -> Plan {
    if (!res.status.ok()) return DbFail(res.status);
    return RespondJson(200, summary).WithBlobDeletes(deletes).WithPoolActions(actions);
  });
}

}  // namespace

Plan MaintenanceTick(const CoreConfig* config, int64_t now_ms, const PoolObservation& pool) {
  const CoreConfig& c = *config;
  std::string why = std::to_string(c.quarantine_failures) + " failed jobs within " +
                    std::to_string(int64_t(c.quarantine_window_s)) + " s";
  const int64_t window_start = now_ms - int64_t(c.quarantine_window_s * 1000);
  Batch b;
  // Both changes start from what is due (expired leases; bans inside the window) through an
  // index, so a tick costs what it finds, not the size of the fleet or of the billing record.
  b.Add(
      "UPDATE segments SET ended_at = COALESCE(last_heartbeat_at, started_at), "
      "end_reason = 'stalled' WHERE ended_at IS NULL AND (job_id, epoch) IN (SELECT j.id, "
      "j.lease_epoch FROM jobs j WHERE j.state = 'running' AND j.lease_expires_at < ?) "
      "RETURNING job_id, epoch, node_id",
      {now_ms});
  b.Add(
      "UPDATE nodes SET state = 'quarantined', state_reason = ?, state_changed_at = ? "
      "WHERE id IN (SELECT node_id FROM job_bans INDEXED BY job_bans_at WHERE at > ?3) AND "
      "state = 'active' AND "
      "(SELECT count(*) FROM job_bans b WHERE b.node_id = nodes.id "
      "AND b.at > MAX(?3, COALESCE(nodes.state_changed_at, -1)) AND " +
          std::string(kCountedBan) + ") >= ? RETURNING id",
      {why, now_ms, window_start, int64_t(c.quarantine_failures)});
  b.Add(
      "SELECT (SELECT count(*) FROM jobs WHERE state = 'running') AS running, "
      "(SELECT value FROM counters WHERE name = 'active_jobs') - "
      "(SELECT count(*) FROM jobs WHERE state = 'running') AS pending, "
      "(SELECT count(DISTINCT node_id) FROM segments WHERE end_reason = 'completed' AND "
      "ended_at >= ?1) AS warm, "
      "(SELECT count(*) FROM nodes WHERE state = 'active' AND last_seen_at >= ?2) AS seen",
      {now_ms - int64_t(c.autoscale_idle_window_s * 1000),
       now_ms - int64_t(c.stall_after_s * 1000)});
  b.Add(
      "SELECT id, machine_id FROM nodes WHERE state = 'quarantined' AND state_changed_at >= ? "
      "ORDER BY state_changed_at, id LIMIT 100",
      {window_start});
  const int64_t old = now_ms - int64_t(c.blob_gc_grace_s * 1000);
  b.Add(std::string("DELETE FROM blobs WHERE key IN (SELECT key FROM blobs WHERE created_at < ? "
                    "AND ((key LIKE 'jobs/%/ckpt/%' AND NOT EXISTS (SELECT 1 FROM checkpoints c "
                    "WHERE c.job_id = ") +
            kKeyJob +
            " AND c.key = blobs.key)) OR (key LIKE 'jobs/%/out/%' AND NOT EXISTS (SELECT 1 "
            "FROM jobs j WHERE j.id = " +
            kKeyJob +
            " AND (j.state IN ('pending', 'running') OR instr(j.outputs, '\"' || blobs.key || "
            "'\"') > 0))) OR (key LIKE 'jobs/%/verify/%' AND NOT EXISTS (SELECT 1 FROM "
            "verifications v WHERE v.job_id = " +
            kKeyJob +
            " AND v.state IN ('pending', 'running')))) ORDER BY created_at LIMIT 1000) "
            "RETURNING key",
        {old});
  b.Add(
      "DELETE FROM uploads WHERE id IN (SELECT id FROM uploads u WHERE u.created_at < ? AND NOT "
      "EXISTS (SELECT 1 FROM blobs WHERE blobs.key = u.key) LIMIT 1000) RETURNING id",
      {old});
  b.Add(
      "UPDATE verifications SET state = 'void', ended_at = ? WHERE state = 'pending' AND "
      "created_at < ? RETURNING id",
      {now_ms, old});
  AddCollectUncommitted(c, now_ms, &b);  // 7, 8 (RETURNING key), 9
  // 10: a replay open longer than verify_max_wait that no active node of the trainer's device
  // could take is unverifiable: not failed, not verified.
  b.Add(
      "UPDATE verifications SET state = 'done', verdict = 'unverifiable', ended_at = ? WHERE "
      "state = 'pending' AND round = 1 AND created_at < ? AND NOT EXISTS (SELECT 1 FROM nodes n "
      "INDEXED BY "
      "nodes_device WHERE "
      "n.state = 'active' AND n.revoked_at IS NULL AND n.id <> verifications.trainer_node AND "
      "n.id IS NOT verifications.other_node AND (verifications.trainer_gpu IS NULL OR "
      "n.gpu_name = verifications.trainer_gpu) AND (verifications.trainer_class IS NULL OR "
      "n.repro_class = "
      "verifications.trainer_class)) "
      "RETURNING id",
      {now_ms, now_ms - int64_t(c.verify_max_wait_s * 1000)});
  // 11: 'verifying' jobs whose last segment has no open replay left are released.
  b.Add(kReleaseVerifiedSql, {now_ms, now_ms});
  return Plan::Run(std::move(b), [config, now_ms, pool](BatchResult res) -> Plan {
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
    Json reallocate = Json::array();
    PoolActions actions;
    const Rows& q = res.results[3];
    for (size_t i = 0; i < q.rows.size(); ++i) {
      actions.reallocate.push_back({q.Get(i, "id").AsText(), q.Get(i, "machine_id").AsText()});
      reallocate.push_back({{"node_id", actions.reallocate.back().node_id},
                            {"machine_id", actions.reallocate.back().machine_id}});
    }
    const Rows& counts = res.results[2];
    AutoscaleInputs in;
    in.running = counts.Get(0, "running").AsInt();
    in.pending = counts.Get(0, "pending").AsInt();
    in.warm_nodes = counts.Get(0, "warm").AsInt();
    in.min_nodes = config->autoscale_min;
    in.max_nodes = config->autoscale_max;
    std::vector<std::string> deletes;
    for (const auto& row : res.results[4].rows) deletes.push_back(row[0].AsText());
    const int64_t uncommitted = int64_t(res.results[8].rows.size());
    for (const auto& row : res.results[8].rows) {
      bool dup = false;
      for (const std::string& k : deletes) dup = dup || k == row[0].AsText();
      if (!dup) deletes.push_back(row[0].AsText());
    }
    Json summary = {{"at", FormatTime(now_ms)},
                    {"stalled", stalled},
                    {"quarantined", quarantined},
                    {"reallocate", reallocate},
                    {"objects_deleted", int64_t(deletes.size())},
                    {"reservations_dropped", int64_t(res.results[5].rows.size())},
                    {"verifications_voided", int64_t(res.results[6].rows.size())},
                    {"verifications_unverifiable", int64_t(res.results[10].rows.size())},
                    {"uncommitted_collected", uncommitted}};
    // Without a provider's count, the fleet as the coordinator sees it: active nodes seen (claim
    // or heartbeat) within stall_after.
    PoolObservation observed = pool;
    if (observed.current < 0) observed.current = counts.Get(0, "seen").AsInt();
    return RecordDecision(config, now_ms, observed, std::move(summary), in, std::move(deletes),
                          std::move(actions));
  });
}

Plan HandleMaintenance(CtxPtr ctx) {
  return MaintenanceTick(ctx->config, ctx->now());
}

}  // namespace gleaner::core
