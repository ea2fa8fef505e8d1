// The lease holder's writes while training: heartbeat, checkpoint upload URL + commit, output
// upload URL. Every write is fenced by (job, epoch, node, running, unexpired) in SQL; zero rows
// changed = 409, explained by a read in the same batch.
#include "coordinator/core/attribution.h"
#include "coordinator/core/blob_urls.h"
#include "coordinator/core/ids.h"
#include "coordinator/core/lease.h"
#include "coordinator/core/lease_quota.h"
#include "coordinator/core/outputs.h"
#include "coordinator/core/routes.h"
#include "coordinator/core/verification.h"
#include "shared/job_params.h"
#include "shared/sha256.h"

namespace gleaner::core {
namespace {

bool JobIdOk(const CtxPtr& ctx) {
  return IsPlainId(ctx->args[0]);
}

Plan StaleCheckpoint(const std::string& message) {
  return Plan::Respond(ErrorResponse(409, "stale_checkpoint", message));
}

}  // namespace

Plan RespondPutUrl(const Ctx& ctx, const std::string& key, int64_t max_size) {
  MintedUrl put = PutUrl(*ctx.config, key, max_size, "", ctx.now());
  return RespondJson(200, {{"key", key},
                           {"url", put.url},
                           {"method", "PUT"},
                           {"max_size", max_size},
                           {"expires_at", FormatTime(put.expires_at_ms)}});
}

// {epoch, step, loss?} -> {lease_expires_at, ttl_s, cancel}. Extends the lease to now +
// stall_after and records the heartbeat on the lease's segment. The holder of a canceled lease
// gets 200 {cancel: true}; anyone else 409.
//
// Progress watchdog (progress_timeout_s > 0): a heartbeat whose step is not above the lease's
// highest step so far, arriving more than progress_timeout_s after the step last advanced (or,
// before any advance, after the claim), renews nothing and is not counted: the lease ends in
// the same batch as a failure of the node on this job (AddLeaseFailure: ban, segment ended
// 'no_progress' at the end of the window, the job back to pending or failed), and the answer
// is 409 no_progress. The time after the window is therefore never billed.
Plan HandleHeartbeat(CtxPtr ctx) {
  if (!JobIdOk(ctx)) return Plan::Fail(Status::NotFound("no such job"));
  FieldReader r(ctx->body);
  static const char* const kKeys[] = {"epoch", "step", "loss", nullptr};
  r.OnlyKeys(kKeys);
  int64_t epoch = 0, step = 0;
  double loss = 0;
  ReadEpoch(r, &epoch);
  r.Int("step", &step, true, 0, kMaxJobSteps);
  bool has_loss = r.Has("loss");
  r.Number("loss", &loss, false, -1e30, 1e30);
  if (!r.ok()) return Plan::Fail(r.status());
  const int64_t now = ctx->now();
  const int64_t expires = now + int64_t(ctx->config->stall_after_s * 1000);
  const int64_t window = int64_t(ctx->config->progress_timeout_s * 1000);
  Fence f = LeaseFence(*ctx, epoch);
  std::string guard = f.sql + " AND ? <= steps_total";
  std::vector<SqlValue> gp = Cat(f.params, {step});
  // No progress: the watchdog is on, this step does not advance the lease, and the last
  // advance (progress_at; NULL: never judged) is older than the window.
  const std::string stuck = "(? > 0 AND ? <= step_done AND COALESCE(progress_at, ?) < ?)";
  const std::vector<SqlValue> sp = {window, step, now, now - window};
  // The lease fence is checked once, by the job's UPDATE; the next two statements act only if
  // the statement before them changed a row (SQLite's changes() is the count of the most
  // recently completed statement; the three run in order inside one transaction).
  Batch b;
  b.Add(
      "UPDATE jobs SET lease_expires_at = ?, progress_at = CASE WHEN ? > step_done THEN ? ELSE "
      "progress_at END, step_done = MAX(step_done, ?), updated_at = ? WHERE " +
          guard + " AND NOT " + stuck + " RETURNING lease_expires_at",
      Cat(Cat({expires, step, now, step, now}, gp), sp));
  b.Add(
      "UPDATE segments SET first_heartbeat_at = COALESCE(first_heartbeat_at, ?), "
      "last_heartbeat_at = ?, heartbeats = heartbeats + 1, step_end = MAX(step_end, ?), "
      "last_loss = COALESCE(?, last_loss) WHERE job_id = ? AND epoch = ? AND ended_at IS NULL "
      "AND changes() = 1",
      {now, now, step, has_loss ? SqlValue(loss) : SqlValue::Null(), ctx->args[0], epoch});
  // Only a heartbeat that held the lease counts as a sign of life (a 409 changes nothing).
  b.Add("UPDATE nodes SET last_seen_at = ? WHERE id = ? AND changes() = 1", {now, ctx->caller.id});
  // Statements 3-7: the watchdog ends a lease without progress (nothing when it progressed).
  const std::string reason = "no progress: the step did not advance past " + std::to_string(step) +
                             " within " + std::to_string(int64_t(ctx->config->progress_timeout_s)) +
                             " s (progress-timeout)";
  AddLeaseFailure(*ctx, Fence{guard + " AND " + stuck, Cat(gp, sp)}, epoch, reason, "no_progress",
                  "(SELECT MIN(?, COALESCE(progress_at, ?) + ?) FROM jobs WHERE id = ?)",
                  {now, now, window, ctx->args[0]}, &b);
  return Plan::Run(std::move(b), [ctx, epoch, step](BatchResult res) -> Plan {
    if (!res.status.ok()) return DbFail(res.status);
    if (!res.results[0].empty()) {
      return RespondLeaseRenewed(*ctx, res.results[0].Get(0, "lease_expires_at").AsInt());
    }
    if (!res.results[7].empty()) {
      return Plan::Respond(ErrorResponse(
          409, "no_progress",
          "the lease ended: the step did not advance within " +
              std::to_string(int64_t(ctx->config->progress_timeout_s)) +
              " s (the operator's progress-timeout); the job went back to the queue (" +
              res.results[7].Get(0, "state").AsText() + ")"));
    }
    // Nothing changed: read the job to say why (only then, so the common case writes only).
    Batch why;
    why.Add(std::string("SELECT ") + kLeaseColumns + " FROM jobs WHERE id = ?", {ctx->args[0]});
    return Plan::Run(std::move(why), [ctx, epoch, step](BatchResult res) -> Plan {
      if (!res.status.ok()) return DbFail(res.status);
      const Rows& job = res.results[0];
      if (HeldBy(job, *ctx, epoch) && job.Get(0, "state").AsText() == "canceled") {
        return RespondLeaseCanceled();
      }
      Status st = ExplainLease(job, *ctx, epoch);
      if (!st.ok()) return Plan::Fail(st);
      if (step > job.Get(0, "steps_total").AsInt()) {
        return Plan::Fail(Status::Invalid("step is beyond the job's steps"));
      }
      return Plan::Fail(Status::Conflict("heartbeat raced with another change; retry"));
    });
  });
}

// {epoch, step, size?} -> {key, url, method, max_size, expires_at}: where to PUT the checkpoint
// of this step, within the lease's allowance for uncommitted objects (lease_quota.h): the URL
// allows the declared size, or without one what remains of the allowance. The mint is recorded
// (lease_objects) in the same conditional statement that checks the lease, the step (after the
// last committed one, at most steps_total) and the allowance.
Plan HandleCheckpointUrl(CtxPtr ctx) {
  if (!JobIdOk(ctx)) return Plan::Fail(Status::NotFound("no such job"));
  FieldReader r(ctx->body);
  static const char* const kKeys[] = {"epoch", "step", "size", nullptr};
  r.OnlyKeys(kKeys);
  LeaseObject o;
  o.kind = LeaseObjectKind::kCheckpoint;
  ReadEpoch(r, &o.epoch);
  r.Int("step", &o.step, true, 1, kMaxJobSteps);
  r.Int("size", &o.declared, false, 0, ctx->config->max_checkpoint_bytes);
  if (!r.ok()) return Plan::Fail(r.status());
  o.key = CheckpointKey(ctx->args[0], o.epoch, o.step);
  Batch b;
  AddMint(*ctx, o, &b);
  b.Add(std::string("SELECT ") + kLeaseColumns + " FROM jobs WHERE id = ?", {ctx->args[0]});
  return Plan::Run(std::move(b), [ctx, o](BatchResult res) -> Plan {
    if (!res.status.ok()) return DbFail(res.status);
    if (!res.results[0].empty()) {
      return RespondPutUrl(*ctx, o.key, res.results[0].Get(0, "max_size").AsInt());
    }
    const Rows& job = res.results[2];
    Status st = ExplainLease(job, *ctx, o.epoch);
    if (!st.ok()) return Plan::Fail(st);
    if (o.step > job.Get(0, "steps_total").AsInt()) {
      return Plan::Fail(Status::Invalid("step is beyond the job's steps"));
    }
    if (!job.Get(0, "ckpt_step").is_null() && job.Get(0, "ckpt_step").AsInt() >= o.step) {
      return StaleCheckpoint("a checkpoint at step " +
                             std::to_string(job.Get(0, "ckpt_step").AsInt()) +
                             " is already committed");
    }
    return RefuseQuota(*ctx, o, res.results[1]);
  });
}

// POST /v1/jobs/{id}/checkpoints/{step}/commit {epoch, sha256, size}: the job's latest
// checkpoint moves to this step only if it is newer. With the built-in store the object must be
// stored with this sha256 and size (blobs). Keeps the newest keep_checkpoints, and those an open
// verification still needs (its start and the checkpoint under check); the keys of the others
// are handed to the shell for deletion after the response. With the job's verify_fraction the
// commit opens a verification of the segment from the previous checkpoint (verification.h);
// the draw comes from the request's entropy, which the node never sees. The last step's
// commit always opens one (the job is 'verifying' until it agrees; routes_finish.cc). The
// checkpoint of the last step carries `outputs` (outputs.h), the files it exports to, and no other
// one does: the job completes only with those outputs, and a replay of the last segment checks
// them.
Plan HandleCheckpointCommit(CtxPtr ctx) {
  if (!JobIdOk(ctx)) return Plan::Fail(Status::NotFound("no such job"));
  int64_t step = 0;
  {
    const std::string& s = ctx->args[1];
    bool ok = !s.empty() && s.size() <= 8;
    for (char c : s) {
      ok = ok && c >= '0' && c <= '9';
      if (ok) step = step * 10 + (c - '0');
    }
    if (!ok || step < 1 || step > kMaxJobSteps) {
      return Plan::Fail(Status::Invalid("checkpoint step in the path must be an integer in [1, " +
                                        std::to_string(kMaxJobSteps) + "]"));
    }
  }
  FieldReader r(ctx->body);
  // "step" repeats the path's step (agents send it); when present it must agree.
  static const char* const kKeys[] = {"epoch", "step", "sha256", "size", "outputs", nullptr};
  r.OnlyKeys(kKeys);
  int64_t epoch = 0, size = 0, body_step = step;
  std::string sha;
  ReadEpoch(r, &epoch);
  r.Int("step", &body_step, false, 1, kMaxJobSteps);
  r.String("sha256", &sha, true, 64);
  r.Int("size", &size, true, 0, ctx->config->max_checkpoint_bytes);
  if (r.ok() && !IsSha256Hex(sha)) r.Fail("sha256 must be 64 lowercase hex characters");
  if (r.ok() && body_step != step) r.Fail("step in the body differs from the step in the path");
  if (!r.ok()) return Plan::Fail(r.status());
  std::vector<OutputFile> files;
  Status read = ReadOutputFiles(ctx->body, "outputs", ctx->config->max_output_bytes, &files);
  if (!read.ok() && read.code() != Code::kNotFound) return Plan::Fail(read);
  const SqlValue outputs = read.ok() ? SqlValue(CanonicalOutputs(files)) : SqlValue();
  const bool has_outputs = read.ok();
  const std::string& job = ctx->args[0];
  const int64_t now = ctx->now();
  const bool builtin = !ctx->config->s3.enabled();
  std::string key = CheckpointKey(job, epoch, step);
  Fence f = LeaseFence(*ctx, epoch);
  std::string newer = f.sql +
                      " AND (ckpt_step IS NULL OR ckpt_step < ?) AND ? <= steps_total AND "
                      "(? = steps_total) = (? IS NOT NULL)";
  std::vector<SqlValue> np = Cat(f.params, {step, step, step, outputs});
  // The object is stored (built-in store), or at least its URL was minted and not collected
  // since (S3, where the coordinator does not see the upload): a collected object is never
  // committed.
  std::string stored = builtin ? " AND EXISTS (SELECT 1 FROM blobs WHERE key = ? AND sha256 = ? "
                                 "AND size = ?)"
                               : " AND EXISTS (SELECT 1 FROM lease_objects WHERE key = ?)";
  std::vector<SqlValue> sp =
      builtin ? std::vector<SqlValue>{key, sha, size} : std::vector<SqlValue>{key};
  std::string row =
      "EXISTS (SELECT 1 FROM checkpoints WHERE job_id = ? AND step = ? AND "
      "epoch = ? AND sha256 = ? AND size = ? AND outputs IS ?)";
  std::vector<SqlValue> rp = {job, step, epoch, sha, size, outputs};
  const SqlValue keep = int64_t(ctx->config->keep_checkpoints);
  Batch b;
  b.Add(
      "INSERT INTO checkpoints (job_id, step, epoch, key, sha256, size, outputs, committed_at) "
      "SELECT ?, ?, ?, ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM jobs WHERE " +
          newer + ")" + stored + " ON CONFLICT DO NOTHING",
      Cat(Cat({job, step, epoch, key, sha, size, outputs, now}, np), sp));
  // Before the job's UPDATE: ckpt_* still name the previous checkpoint, the segment's start.
  b.Add(
      "INSERT INTO verifications (id, job_id, round, step_from, from_key, from_sha256, "
      "from_size, step, claimed_sha256, claimed_outputs, trainer_node, trainer_gpu, "
      "trainer_class, state, created_at) SELECT ?, id, 1, COALESCE(ckpt_step, 0), ckpt_key, "
      "ckpt_sha256, ckpt_size, ?, ?, ?, ?, (SELECT gpu_name FROM nodes WHERE nodes.id = ?), "
      "(SELECT repro_class FROM nodes WHERE nodes.id = ?), 'pending', ? FROM jobs "
      "WHERE " +
          newer + " AND " + row +
          " AND verify_fraction > 0 AND (? < verify_fraction OR ? = steps_total)",
      Cat(Cat(Cat({NewId(ctx->req.entropy, "v"), step, sha, outputs, ctx->caller.id, ctx->caller.id,
                   ctx->caller.id, now},
                  np),
              rp),
          {VerificationDraw(ctx->req.entropy), step}));
  b.Add(
      "UPDATE segments SET step_committed = MAX(step_committed, ?), step_end = MAX(step_end, ?) "
      "WHERE job_id = ? AND epoch = ? AND EXISTS (SELECT 1 FROM jobs WHERE " +
          newer + ") AND " + row,
      Cat(Cat({step, step, job, epoch}, np), rp));
  // A lease that trains past an open input error's step did not reproduce it (attribution.h).
  AddNotReproduced(&b, job, step, now, "EXISTS (SELECT 1 FROM jobs WHERE " + newer + ") AND " + row,
                   Cat(np, rp));
  b.Add(
      "UPDATE jobs SET ckpt_step = ?, ckpt_key = ?, ckpt_sha256 = ?, ckpt_size = ?, "
      "ckpt_committed_at = ?, progress_at = CASE WHEN ? > step_done THEN ? ELSE progress_at "
      "END, step_done = MAX(step_done, ?), updated_at = ? WHERE " +
          newer + " AND " + row + " RETURNING ckpt_step",
      Cat(Cat({step, key, sha, size, now, step, now, step, now}, np), rp));
  const std::string needed =
      " AND NOT EXISTS (SELECT 1 FROM verifications v WHERE v.job_id = checkpoints.job_id AND "
      "v.state IN ('pending', 'running') AND checkpoints.step IN (v.step_from, v.step))";
  const std::string pruned =
      "SELECT key FROM checkpoints WHERE job_id = ? AND step NOT IN "
      "(SELECT step FROM checkpoints WHERE job_id = ? ORDER BY step DESC "
      "LIMIT ?)" +
      needed;
  b.Add("DELETE FROM blobs WHERE key IN (" + pruned + ")", {job, job, keep});
  b.Add(
      "DELETE FROM checkpoints WHERE job_id = ? AND step NOT IN (SELECT step FROM checkpoints "
      "WHERE job_id = ? ORDER BY step DESC LIMIT ?)" +
          needed + " RETURNING key",
      {job, job, keep});
  b.Add(std::string("SELECT ") + kLeaseColumns + " FROM jobs WHERE id = ?", {job});
  b.Add("SELECT size, sha256 FROM blobs WHERE key = ?", {key});
  b.Add("SELECT sha256, size, epoch, outputs FROM checkpoints WHERE job_id = ? AND step = ?",
        {job, step});
  // 11: a committed object leaves the lease's uncommitted allowance (lease_quota.h).
  b.Add(
      "DELETE FROM lease_objects WHERE key = ? AND EXISTS (SELECT 1 FROM checkpoints WHERE "
      "job_id = ? AND step = ? AND key = ?)",
      {key, job, step, key});
  b.Add("SELECT key FROM lease_objects WHERE key = ?", {key});
  return Plan::Run(
      std::move(b),
      [ctx, epoch, step, sha, size, key, builtin, outputs, has_outputs](BatchResult res) -> Plan {
        if (!res.status.ok()) return DbFail(res.status);
        std::vector<std::string> deletes;
        for (const auto& row : res.results[7].rows) deletes.push_back(row[0].AsText());
        auto respond = [&](Plan p) { return std::move(p).WithBlobDeletes(deletes); };
        Json ok = {
            {"committed", true}, {"step", step}, {"key", key}, {"sha256", sha}, {"size", size}};
        if (!res.results[5].empty()) return respond(RespondJson(200, ok));
        const Rows& job = res.results[8];
        Status st = ExplainLease(job, *ctx, epoch);
        if (!st.ok()) return respond(Plan::Fail(st));
        const int64_t steps = job.Get(0, "steps_total").AsInt();
        if (step > steps) {
          return respond(Plan::Fail(Status::Invalid("step is beyond the job's steps")));
        }
        if (step == steps && !has_outputs) {
          return respond(Plan::Fail(
              Status::Invalid("the checkpoint of the last step must carry outputs: the files it "
                              "exports to, as the job will complete with them")));
        }
        if (step < steps && has_outputs) {
          return respond(Plan::Fail(
              Status::Invalid("outputs come only with the checkpoint of the last step")));
        }
        const Rows& existing = res.results[10];
        if (job.Get(0, "ckpt_step").AsInt() == step && !existing.empty() &&
            existing.Get(0, "sha256").AsText() == sha && existing.Get(0, "size").AsInt() == size &&
            existing.Get(0, "epoch").AsInt() == epoch &&
            existing.Get(0, "outputs").AsText() == outputs.AsText()) {  // "" when NULL
          return respond(RespondJson(200, ok));  // a retried commit: already done
        }
        if (!job.Get(0, "ckpt_step").is_null() && job.Get(0, "ckpt_step").AsInt() >= step) {
          return respond(StaleCheckpoint("a checkpoint at step " +
                                         std::to_string(job.Get(0, "ckpt_step").AsInt()) +
                                         " is already committed"));
        }
        if (!builtin && res.results[12].empty()) {
          return respond(Plan::Fail(Status::Invalid(
              "no upload URL is open for " + key +
              " (never asked for, or collected after uncommitted-grace); ask for one and upload "
              "it again")));
        }
        const Rows& blob = res.results[9];
        if (builtin && (blob.empty() || blob.Get(0, "sha256").AsText() != sha ||
                        blob.Get(0, "size").AsInt() != size)) {
          return respond(Plan::Fail(Status::Invalid(
              blob.empty() ? "no object is stored at " + key + "; upload it before committing"
                           : "the object stored at " + key + " has a different sha256 or size")));
        }
        return respond(Plan::Fail(Status::Conflict("commit raced with another change; retry")));
      });
}

// {epoch, name, size?} -> {key, url, method, max_size, expires_at}: where to PUT a result file,
// within the lease's output allowance (lease_quota.h): at most lease_max_outputs names and
// lease_max_output_bytes in all; the URL allows the declared size, or what remains.
Plan HandleOutputUrl(CtxPtr ctx) {
  if (!JobIdOk(ctx)) return Plan::Fail(Status::NotFound("no such job"));
  FieldReader r(ctx->body);
  static const char* const kKeys[] = {"epoch", "name", "size", nullptr};
  r.OnlyKeys(kKeys);
  LeaseObject o;
  o.kind = LeaseObjectKind::kOutput;
  ReadEpoch(r, &o.epoch);
  r.String("name", &o.name, true, 128);
  r.Int("size", &o.declared, false, 0, ctx->config->max_output_bytes);
  if (r.ok() && !IsSafeName(o.name))
    r.Fail("name must be 1-128 characters of [A-Za-z0-9._-], not starting with '.'");
  if (!r.ok()) return Plan::Fail(r.status());
  o.key = OutputKey(ctx->args[0], o.epoch, o.name);
  Batch b;
  AddMint(*ctx, o, &b);
  b.Add(std::string("SELECT ") + kLeaseColumns + " FROM jobs WHERE id = ?", {ctx->args[0]});
  return Plan::Run(std::move(b), [ctx, o](BatchResult res) -> Plan {
    if (!res.status.ok()) return DbFail(res.status);
    if (!res.results[0].empty()) {
      return RespondPutUrl(*ctx, o.key, res.results[0].Get(0, "max_size").AsInt());
    }
    Status st = ExplainLease(res.results[2], *ctx, o.epoch);
    if (!st.ok()) return Plan::Fail(st);
    return RefuseQuota(*ctx, o, res.results[1]);
  });
}

}  // namespace gleaner::core
