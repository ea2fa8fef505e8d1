// How a lease ends, by its holder: complete, fail, release. Each is one batch whose statements
// are all guarded by the lease fence; side effects (segment, node counters, bans, quarantine)
// come first and the job's state change last, so every guard sees the lease still held.
#include <algorithm>

#include "coordinator/core/attribution.h"
#include "coordinator/core/lease.h"
#include "coordinator/core/outputs.h"
#include "coordinator/core/routes.h"
#include "coordinator/core/verification.h"
#include "shared/job_params.h"

namespace gleaner::core {
namespace {

std::string Truncate(std::string s, size_t n) {
  if (s.size() > n) s.resize(n);
  return s;
}

// The answer to a fail batch whose statement `job_index` updates the job (RETURNING state,
// failures), `quarantine_index` quarantines the caller (-1: none) and whose last statement
// reads the job with kLeaseColumns.
Plan RespondFail(const CtxPtr& ctx, int64_t epoch, Batch b, const char* cause, size_t job_index,
                 int quarantine_index) {
  const std::string job = ctx->args[0];
  return Plan::Run(std::move(b),
                   [ctx, epoch, job, cause, job_index, quarantine_index](BatchResult res) -> Plan {
                     if (!res.status.ok()) return DbFail(res.status);
                     const Rows& done = res.results[job_index];
                     if (!done.empty()) {
                       bool quarantined =
                           quarantine_index >= 0 && !res.results[size_t(quarantine_index)].empty();
                       return RespondJson(200, {{"job_id", job},
                                                {"state", done.Get(0, "state").AsText()},
                                                {"failures", done.Get(0, "failures").AsInt()},
                                                {"cause", cause},
                                                {"node_quarantined", quarantined}});
                     }
                     Status st = ExplainLease(res.results.back(), *ctx, epoch);
                     if (!st.ok()) return Plan::Fail(st);
                     return Plan::Fail(Status::Conflict("fail raced with another change; retry"));
                   });
}

// An input error (fail with cause "input"): never a ban, a failure count or a quarantine. With
// no open input error on the job, this report opens one (input_errors, outcome NULL, at the
// step the lease reached: the larger of the body's step and the last one it reported) and the
// job goes back to pending, where only a node of another machine may claim it
// (routes_work.cc). With an open one from another machine and node, this report confirms it:
// both rows become 'confirmed' and the job fails with this report's reason (the trainer's
// message, as the developer sees it in the job and its events).
Plan AddInputError(const CtxPtr& ctx, int64_t epoch, const std::string& reason, int64_t step) {
  const std::string& job = ctx->args[0];
  const std::string& node = ctx->caller.id;
  const int64_t now = ctx->now();
  Fence f = LeaseFence(*ctx, epoch);
  std::string exists = "EXISTS (SELECT 1 FROM jobs WHERE " + f.sql + ")";
  // ?1 job, ?2 node: an open report from another node of another machine.
  const std::string open_other =
      "EXISTS (SELECT 1 FROM input_errors e WHERE e.job_id = ?1 AND e.outcome IS NULL AND "
      "e.node_id <> ?2 AND e.machine_id <> (SELECT n.machine_id FROM nodes n WHERE n.id = ?2))";
  const std::string open_any =
      "EXISTS (SELECT 1 FROM input_errors e WHERE e.job_id = ?1 AND e.outcome IS NULL)";
  // ?3 step, ?4 reason, ?5 now; the fence's own "?" come last and number on from ?6.
  Batch b;
  b.Add(
      "INSERT INTO input_errors (job_id, epoch, node_id, machine_id, step, reason, at, outcome, "
      "outcome_at) SELECT id, lease_epoch, ?2, (SELECT n.machine_id FROM nodes n WHERE n.id = "
      "?2), MIN(steps_total, MAX(step_done, ?3)), ?4, ?5, CASE WHEN " +
          open_other + " THEN 'confirmed' END, CASE WHEN " + open_other +
          " THEN ?5 END FROM jobs WHERE (NOT " + open_any + " OR " + open_other + ") AND " + f.sql +
          " ON CONFLICT DO NOTHING",
      Cat({job, node, step, reason, now}, f.params));
  // This lease's row is 'confirmed' only if it confirmed an open one: settle that one too.
  b.Add(
      "UPDATE input_errors SET outcome = 'confirmed', outcome_at = ? WHERE job_id = ? AND "
      "outcome IS NULL AND EXISTS (SELECT 1 FROM input_errors c WHERE c.job_id = ? AND c.epoch "
      "= ? AND c.node_id = ? AND c.outcome = 'confirmed') AND " +
          exists,
      Cat({now, job, job, epoch, node}, f.params));
  b.Add(
      "UPDATE segments SET ended_at = ?, end_reason = 'input_error', note = ? WHERE job_id = ? "
      "AND epoch = ? AND ended_at IS NULL AND " +
          exists,
      Cat({now, reason, job, epoch}, f.params));
  const std::string confirmed =
      "EXISTS (SELECT 1 FROM input_errors c WHERE c.job_id = jobs.id AND c.epoch = "
      "jobs.lease_epoch AND c.outcome = 'confirmed')";
  b.Add("UPDATE jobs SET state = CASE WHEN " + confirmed + " THEN 'failed' ELSE 'pending' END, " +
            "node_id = CASE WHEN " + confirmed + " THEN node_id END, finished_at = CASE WHEN " +
            confirmed +
            " THEN ? END, reason = ?, lease_expires_at = NULL, step_done = COALESCE(ckpt_step, "
            "0), updated_at = ? WHERE " +
            f.sql + " RETURNING state, failures",
        Cat({now, reason, now}, f.params));
  b.Add(std::string("SELECT ") + kLeaseColumns + " FROM jobs WHERE id = ?", {job});
  return RespondFail(ctx, epoch, std::move(b), "input", 3, -1);
}

}  // namespace

// {epoch, outputs: [{name, sha256, size}]} -> {job_id, state: "completed" | "verifying"}
// ("verifying": the replay of the last segment, which every job with verify_fraction > 0 gets,
// has not agreed yet; the outputs are released when it does). The lease must have
// reported the job's last step (a heartbeat or checkpoint commit with step = steps), else 409.
// With the built-in store every output must be stored at jobs/<id>/out/e<epoch>/<name> with
// that sha256 and size. The outputs must be the ones the checkpoint of the last step was
// committed with (outputs.h: the export of the final checkpoint, which a replay of the last
// segment checks); a job with verify_fraction > 0 cannot complete without that checkpoint
// (400 either way). A retry by the same holder after success answers 200 again.
Plan HandleComplete(CtxPtr ctx) {
  if (!IsPlainId(ctx->args[0])) return Plan::Fail(Status::NotFound("no such job"));
  FieldReader r(ctx->body);
  static const char* const kKeys[] = {"epoch", "outputs", nullptr};
  r.OnlyKeys(kKeys);
  int64_t epoch = 0;
  ReadEpoch(r, &epoch);
  if (!r.ok()) return Plan::Fail(r.status());
  std::vector<OutputFile> outputs;
  Status st = ReadOutputFiles(ctx->body, "outputs", ctx->config->max_output_bytes, &outputs);
  if (st.code() == Code::kNotFound) {
    st = Status::Invalid("outputs must be an array of 1 to 64 {name, sha256, size} objects");
  }
  if (!st.ok()) return Plan::Fail(st);
  const std::string canonical = CanonicalOutputs(outputs);
  const std::string& job = ctx->args[0];
  const int64_t now = ctx->now();
  const bool builtin = !ctx->config->s3.enabled();
  Fence f = LeaseFence(*ctx, epoch);
  // The outputs the final checkpoint was committed with; without one, only an unverified job
  // may complete (NULL = x is never true).
  const char* const kFinalOutputs =
      "(SELECT c.outputs FROM checkpoints c WHERE c.job_id = jobs.id AND c.step = "
      "jobs.steps_total AND c.outputs IS NOT NULL)";
  std::string guard = f.sql + " AND step_done = steps_total AND COALESCE(" + kFinalOutputs +
                      ", CASE WHEN verify_fraction = 0 THEN ? END) = ?";
  std::vector<SqlValue> gp = Cat(f.params, {canonical, canonical});
  Json stored = Json::array();
  std::string blob_terms, key_list = "''";
  std::vector<SqlValue> blob_params, key_params;
  for (const OutputFile& o : outputs) {
    std::string key = OutputKey(job, epoch, o.name);
    stored.push_back({{"name", o.name}, {"key", key}, {"sha256", o.sha256}, {"size", o.size}});
    blob_terms +=
        std::string(blob_terms.empty() ? "" : " OR ") + "(key = ? AND sha256 = ? AND size = ?)";
    blob_params = Cat(blob_params, {key, o.sha256, o.size});
    key_list += ", ?";
    key_params.push_back(key);
  }
  if (builtin) {
    guard += " AND (SELECT count(*) FROM blobs WHERE " + blob_terms + ") = ?";
    gp = Cat(Cat(gp, blob_params), {int64_t(outputs.size())});
  }
  std::string exists = "EXISTS (SELECT 1 FROM jobs WHERE " + guard + ")";
  Batch b;
  b.Add("UPDATE nodes SET jobs_completed = jobs_completed + 1 WHERE id = ? AND " + exists,
        Cat({ctx->caller.id}, gp));
  b.Add(
      "UPDATE segments SET ended_at = ?, end_reason = 'completed', "
      "step_end = (SELECT steps_total FROM jobs WHERE id = ?), "
      "step_committed = (SELECT steps_total FROM jobs WHERE id = ?) "
      "WHERE job_id = ? AND epoch = ? AND ended_at IS NULL AND " +
          exists,
      Cat({now, job, job, job, epoch}, gp));
  // A completion never reproduces an open input error (attribution.h).
  AddNotReproduced(&b, job, kMaxJobSteps + 1, now, exists, gp);
  b.Add(
      // With a replay of the last segment still open the job is 'verifying': its outputs are
      // released when the replay agrees (ReleaseVerifiedSql).
      std::string("UPDATE jobs SET state = CASE WHEN ") + kLastReplayOpenSql +
          " THEN 'verifying' ELSE 'completed' END, outputs = ?, finished_at = CASE WHEN " +
          kLastReplayOpenSql +
          " THEN NULL ELSE ? END, updated_at = ?, step_done = steps_total, lease_expires_at = "
          "NULL WHERE " +
          guard + " RETURNING id, state",
      Cat({DumpJson(stored), now, now}, gp));
  b.Add(std::string("SELECT ") + kLeaseColumns + ", step_done, verify_fraction, " + kFinalOutputs +
            " AS final_outputs FROM jobs WHERE id = ?",
        {job});
  b.Add("SELECT key, sha256, size FROM blobs WHERE key IN (" + key_list + ")", key_params);
  return Plan::Run(
      std::move(b), [ctx, epoch, outputs, canonical, builtin, job](BatchResult res) -> Plan {
        if (!res.status.ok()) return DbFail(res.status);
        if (!res.results[4].empty()) {
          return RespondJson(200,
                             {{"job_id", job}, {"state", res.results[4].Get(0, "state").AsText()}});
        }
        const Rows& row = res.results[5];
        const std::string now_state = row.empty() ? "" : row.Get(0, "state").AsText();
        Json ok = {{"job_id", job}, {"state", now_state}};
        if ((now_state == "completed" || now_state == "verifying") &&
            row.Get(0, "lease_epoch").AsInt() == epoch &&
            row.Get(0, "node_id").AsText() == ctx->caller.id) {
          return RespondJson(200, ok);  // retried completion
        }
        Status st = ExplainLease(row, *ctx, epoch);
        if (!st.ok()) return Plan::Fail(st);
        if (builtin) {
          const Rows& blobs = res.results[6];
          for (const OutputFile& o : outputs) {
            std::string key = OutputKey(job, epoch, o.name);
            bool found = false;
            for (size_t i = 0; i < blobs.rows.size(); ++i) {
              if (blobs.Get(i, "key").AsText() == key &&
                  blobs.Get(i, "sha256").AsText() == o.sha256 &&
                  blobs.Get(i, "size").AsInt() == o.size) {
                found = true;
              }
            }
            if (!found) {
              return Plan::Fail(Status::Invalid("output " + o.name + " is not stored at " + key +
                                                " with that sha256 and size; upload it first"));
            }
          }
        }
        const int64_t done = row.Get(0, "step_done").AsInt();
        const int64_t steps = row.Get(0, "steps_total").AsInt();
        if (done != steps) {
          return Plan::Fail(Status::Conflict(
              "the job is at step " + std::to_string(done) + " of " + std::to_string(steps) +
              "; report the last step in a heartbeat before completing"));
        }
        const SqlValue& bound = row.Get(0, "final_outputs");
        if (bound.is_null() && row.Get(0, "verify_fraction").AsReal() > 0) {
          return Plan::Fail(Status::Invalid("the job is verified: commit the checkpoint of step " +
                                            std::to_string(steps) +
                                            " with its outputs before completing"));
        }
        if (!bound.is_null() && bound.AsText() != canonical) {
          return Plan::Fail(Status::Invalid("outputs differ from the ones the checkpoint of step " +
                                            std::to_string(steps) + " was committed with (" +
                                            bound.AsText() + ")"));
        }
        return Plan::Fail(Status::Conflict("completion raced with another change; retry"));
      });
}

// {epoch, reason?, cause?, step?} -> {job_id, state: "pending" | "failed", failures,
// node_quarantined, cause}. cause "node" (the default: an agent that does not attribute its
// failures) is a node fault: bans (job, node); failures += 1; the job goes back to pending, or
// to failed once failures reach max_failures (each failure is from a distinct node, since
// banned nodes never get the job again). The node is quarantined when it has
// quarantine_failures counted bans (attribution.h: not on jobs failed for everyone, this one
// included when this failure ends it) within quarantine_window_s (failures before its last
// restore do not count). cause "input" (the trainer refused the job's inputs) is AddInputError.
Plan HandleFail(CtxPtr ctx) {
  if (!IsPlainId(ctx->args[0])) return Plan::Fail(Status::NotFound("no such job"));
  FieldReader r(ctx->body);
  static const char* const kKeys[] = {"epoch", "reason", "cause", "step", nullptr};
  r.OnlyKeys(kKeys);
  int64_t epoch = 0, step = 0;
  std::string reason, cause = "node";
  ReadEpoch(r, &epoch);
  r.String("reason", &reason, false, 65536);
  r.String("cause", &cause, false, 16);
  r.Int("step", &step, false, 0, kMaxJobSteps);
  if (r.ok() && cause != "node" && cause != "input") r.Fail("cause must be \"input\" or \"node\"");
  if (!r.ok()) return Plan::Fail(r.status());
  reason = reason.empty() ? "failed" : Truncate(reason, 4000);
  if (cause == "input") return AddInputError(ctx, epoch, reason, step);
  const std::string& job = ctx->args[0];
  Fence f = LeaseFence(*ctx, epoch);
  Batch b;
  AddLeaseFailure(*ctx, f, epoch, reason, "failed", "?", {ctx->now()}, &b);
  b.Add(std::string("SELECT ") + kLeaseColumns + " FROM jobs WHERE id = ?", {job});
  return RespondFail(ctx, epoch, std::move(b), "node", 4, 3);
}

// {epoch, reason?} -> {job_id, state: "pending"}: interrupted (e.g. SIGTERM after a final
// checkpoint); the job is queued again at once. Never a failure, never a ban.
Plan HandleRelease(CtxPtr ctx) {
  if (!IsPlainId(ctx->args[0])) return Plan::Fail(Status::NotFound("no such job"));
  FieldReader r(ctx->body);
  static const char* const kKeys[] = {"epoch", "reason", nullptr};
  r.OnlyKeys(kKeys);
  int64_t epoch = 0;
  std::string reason = "released";
  ReadEpoch(r, &epoch);
  r.String("reason", &reason, false, 65536);
  if (!r.ok()) return Plan::Fail(r.status());
  reason = Truncate(reason, 4000);
  const std::string& job = ctx->args[0];
  const int64_t now = ctx->now();
  Fence f = LeaseFence(*ctx, epoch);
  Batch b;
  b.Add(
      "UPDATE segments SET ended_at = ?, end_reason = 'released', note = ? WHERE job_id = ? "
      "AND epoch = ? AND ended_at IS NULL AND EXISTS (SELECT 1 FROM jobs WHERE " +
          f.sql + ")",
      Cat({now, reason, job, epoch}, f.params));
  b.Add(
      "UPDATE jobs SET state = 'pending', node_id = NULL, lease_expires_at = NULL, "
      "step_done = COALESCE(ckpt_step, 0), updated_at = ? WHERE " +
          f.sql + " RETURNING id",
      Cat({now}, f.params));
  b.Add(std::string("SELECT ") + kLeaseColumns + " FROM jobs WHERE id = ?", {job});
  return Plan::Run(std::move(b), [ctx, epoch, job](BatchResult res) -> Plan {
    if (!res.status.ok()) return DbFail(res.status);
    if (!res.results[1].empty()) return RespondJson(200, {{"job_id", job}, {"state", "pending"}});
    Status st = ExplainLease(res.results[2], *ctx, epoch);
    if (!st.ok()) return Plan::Fail(st);
    return Plan::Fail(Status::Conflict("release raced with another change; retry"));
  });
}

}  // namespace gleaner::core
