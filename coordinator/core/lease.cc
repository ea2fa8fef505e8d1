#include "coordinator/core/lease.h"

#include <cstdio>

#include "coordinator/core/attribution.h"
#include "shared/job_params.h"

namespace gleaner::core {

Fence LeaseFence(const Ctx& ctx, int64_t epoch) {
  return {
      "id = ? AND lease_epoch = ? AND node_id = ? AND state = 'running' AND "
      "lease_expires_at >= ?",
      {ctx.args.at(0), epoch, ctx.caller.id, ctx.now()}};
}

const char* const kLeaseColumns =
    "id, state, lease_epoch, node_id, lease_expires_at, steps_total, ckpt_step, ckpt_sha256, "
    "ckpt_size, outputs";

Status ExplainLease(const Rows& job, const Ctx& ctx, int64_t epoch) {
  if (job.empty()) return Status::NotFound("no such job");
  const std::string& state = job.Get(0, "state").AsText();
  int64_t current = job.Get(0, "lease_epoch").AsInt();
  if (epoch != current) {
    return Status::Conflict("lease epoch " + std::to_string(epoch) + " is stale (current epoch " +
                            std::to_string(current) + ")");
  }
  if (job.Get(0, "node_id").AsText() != ctx.caller.id) {
    return Status::Conflict("the lease is held by another node");
  }
  if (state != "running") return Status::Conflict("job is " + state);
  if (job.Get(0, "lease_expires_at").AsInt() < ctx.now()) {
    return Status::Conflict("the lease expired");
  }
  return Status::Ok();
}

void AddLeaseFailure(const Ctx& ctx, const Fence& f, int64_t epoch, const std::string& reason,
                     const std::string& end_reason, const std::string& ended_at_sql,
                     const std::vector<SqlValue>& ended_at_params, Batch* b) {
  const std::string& job = ctx.args.at(0);
  const std::string& node = ctx.caller.id;
  const int64_t now = ctx.now();
  const CoreConfig& c = *ctx.config;
  std::string exists = "EXISTS (SELECT 1 FROM jobs WHERE " + f.sql + ")";
  b->Add("INSERT INTO job_bans (job_id, node_id, reason, at) SELECT ?, ?, ?, ? WHERE " + exists +
             " ON CONFLICT DO NOTHING",
         Cat({job, node, reason, now}, f.params));
  b->Add("UPDATE segments SET ended_at = " + ended_at_sql +
             ", end_reason = ?, note = ? WHERE job_id = ? AND epoch = ? AND ended_at IS NULL AND " +
             exists,
         Cat(Cat(ended_at_params, {end_reason, reason, job, epoch}), f.params));
  b->Add("UPDATE nodes SET jobs_failed = jobs_failed + 1 WHERE id = ? AND " + exists,
         Cat({node}, f.params));
  std::string why = std::to_string(c.quarantine_failures) + " failed jobs within " +
                    std::to_string(int64_t(c.quarantine_window_s)) + " s";
  // Bans on jobs that failed for everyone do not count (attribution.h: kCountedBan); this job
  // is still running here, so its ban counts unless this failure ends it.
  b->Add(QuarantineSql("?", "SELECT n.id FROM nodes n WHERE n.id = ? AND " + exists +
                                " AND (SELECT count(*) FROM job_bans b WHERE b.node_id = n.id AND "
                                "b.at > MAX(?, COALESCE(n.state_changed_at, -1)) AND " +
                                kCountedBan +
                                " AND NOT (b.job_id = ? AND (SELECT failures + 1 >= max_failures "
                                "FROM jobs WHERE id = ?))) >= ?") +
             " RETURNING id",
         Cat(Cat({now, why, node}, f.params), {now - int64_t(c.quarantine_window_s * 1000), job,
                                               job, int64_t(c.quarantine_failures)}));
  b->Add(
      "UPDATE jobs SET failures = failures + 1, "
      "state = CASE WHEN failures + 1 >= max_failures THEN 'failed' ELSE 'pending' END, "
      "node_id = CASE WHEN failures + 1 >= max_failures THEN node_id ELSE NULL END, "
      "finished_at = CASE WHEN failures + 1 >= max_failures THEN ? ELSE NULL END, "
      "reason = ?, lease_expires_at = NULL, step_done = COALESCE(ckpt_step, 0), updated_at = ? "
      "WHERE " +
          f.sql + " RETURNING state, failures",
      Cat({now, reason, now}, f.params));
}

bool ReadEpoch(FieldReader& r, int64_t* epoch) {
  return r.Int("epoch", epoch, true, 1, kMaxSafeInteger);
}

Status ReadEpochOnly(const Json& body, int64_t* epoch) {
  FieldReader r(body);
  static const char* const kKeys[] = {"epoch", nullptr};
  r.OnlyKeys(kKeys);
  ReadEpoch(r, epoch);
  return r.status();
}

bool HeldBy(const Rows& row, const Ctx& ctx, int64_t epoch) {
  return !row.empty() && row.Get(0, "lease_epoch").AsInt() == epoch &&
         row.Get(0, "node_id").AsText() == ctx.caller.id;
}

Plan RespondLeaseCanceled() {
  return RespondJson(200, {{"lease_expires_at", nullptr}, {"ttl_s", 0}, {"cancel", true}});
}

Plan RespondLeaseRenewed(const Ctx& ctx, int64_t expires_at_ms) {
  return RespondJson(200, {{"lease_expires_at", FormatTime(expires_at_ms)},
                           {"ttl_s", ctx.config->stall_after_s},
                           {"cancel", false}});
}

std::string CheckpointKey(const std::string& job, int64_t epoch, int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%010lld", (long long)step);
  return "jobs/" + job + "/ckpt/e" + std::to_string(epoch) + "/s" + buf;
}

std::string SampleKey(const std::string& job, int64_t epoch, int64_t step, int64_t index) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%010lld", (long long)step);
  return "jobs/" + job + "/samples/e" + std::to_string(epoch) + "/s" + buf + "/" +
         std::to_string(index) + ".png";
}

std::string OutputKey(const std::string& job, int64_t epoch, const std::string& name) {
  return "jobs/" + job + "/out/e" + std::to_string(epoch) + "/" + name;
}

}  // namespace gleaner::core
