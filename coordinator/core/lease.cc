#include "coordinator/core/lease.h"

#include <cstdio>

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
