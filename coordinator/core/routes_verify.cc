// The verifier's lease (verification.h): heartbeat, checkpoint upload URL, commit. The lease
// fence and its explanation are the job lease's (lease.h): a verifications row has the same
// columns (id, lease_epoch, node_id, state = 'running', lease_expires_at), so every write here
// is fenced exactly like a job's.
//
// The commit decides in SQL, in one batch: the first statement finishes the row under the fence
// and stamps it with a fresh nonce and its verdict (a CASE over the stored sha256s), every
// later statement acts only on the row carrying that nonce and that verdict:
//   disagree     -> a round-2 verification of the same segment (a third node);
//   verifier_bad -> the first verifier is quarantined;
//   trainer_bad  -> the trainer is quarantined and banned from the job;
//   trainer_bad, no_majority -> the job is rewound to the segment's start (checkpoint k): every
//                   checkpoint from the bad one on is discarded, verifications that replay from
//                   them are void, a lease on the job ends (its holder gets 409), a completed
//                   job is pending again. Only while the bad checkpoint is still the job's
//                   (an earlier rewind may have discarded it already). The work discarded
//                   is rework (segments.rework);
//   trainer_bad, verifier_bad -> the taint rewind (taint.h): every other job the quarantined
//                   forger's work reached goes back to before its first segment there;
//   then every 'verifying' job whose last replay is no longer open is released (completed).
#include "coordinator/core/attribution.h"
#include "coordinator/core/blob_urls.h"
#include "coordinator/core/ids.h"
#include "coordinator/core/lease.h"
#include "coordinator/core/outputs.h"
#include "coordinator/core/routes.h"
#include "coordinator/core/taint.h"
#include "coordinator/core/verification.h"
#include "shared/job_params.h"
#include "shared/sha256.h"

namespace gleaner::core {
namespace {

const char* const kVerificationLeaseColumns =
    "id, job_id, state, lease_epoch, node_id, lease_expires_at, result_sha256, "
    "result_outputs, claimed_outputs IS NOT NULL AS last_segment";

Batch ReadVerification(const std::string& id) {
  Batch b;
  b.Add(std::string("SELECT ") + kVerificationLeaseColumns + " FROM verifications WHERE id = ?",
        {id});
  return b;
}

// ExplainLease over a verifications row ("no such verification" rather than "no such job").
Status ExplainVerificationLease(const Rows& v, const Ctx& ctx, int64_t epoch) {
  if (v.empty()) return Status::NotFound("no such verification");
  return ExplainLease(v, ctx, epoch);
}

}  // namespace

// {epoch, step?} -> {lease_expires_at, ttl_s, cancel}. A verification voided meanwhile (its
// job was rewound or canceled) answers its holder {cancel: true}.
Plan HandleVerifyHeartbeat(CtxPtr ctx) {
  if (!IsPlainId(ctx->args[0])) return Plan::Fail(Status::NotFound("no such verification"));
  FieldReader r(ctx->body);
  static const char* const kKeys[] = {"epoch", "step", nullptr};
  r.OnlyKeys(kKeys);
  int64_t epoch = 0, step = 0;
  ReadEpoch(r, &epoch);
  r.Int("step", &step, false, 0, kMaxJobSteps);
  if (!r.ok()) return Plan::Fail(r.status());
  const int64_t now = ctx->now();
  const int64_t expires = now + int64_t(ctx->config->stall_after_s * 1000);
  Fence f = LeaseFence(*ctx, epoch);
  Batch b;
  b.Add("UPDATE verifications SET lease_expires_at = ? WHERE " + f.sql +
            " RETURNING lease_expires_at",
        Cat({expires}, f.params));
  b.Add("UPDATE nodes SET last_seen_at = ? WHERE id = ? AND changes() = 1", {now, ctx->caller.id});
  return Plan::Run(std::move(b), [ctx, epoch](BatchResult res) -> Plan {
    if (!res.status.ok()) return DbFail(res.status);
    if (!res.results[0].empty()) {
      return RespondLeaseRenewed(*ctx, res.results[0].Get(0, "lease_expires_at").AsInt());
    }
    return Plan::Run(ReadVerification(ctx->args[0]), [ctx, epoch](BatchResult res) -> Plan {
      if (!res.status.ok()) return DbFail(res.status);
      const Rows& v = res.results[0];
      if (HeldBy(v, *ctx, epoch) && v.Get(0, "state").AsText() == "void") {
        return RespondLeaseCanceled();
      }
      Status st = ExplainVerificationLease(v, *ctx, epoch);
      if (!st.ok()) return Plan::Fail(st);
      return Plan::Fail(Status::Conflict("heartbeat raced with another change; retry"));
    });
  });
}

// {epoch} -> {key, url, method, max_size, expires_at}: where to PUT the replayed checkpoint (the
// archive of stop_step, packed like a job's checkpoint). Read-only.
Plan HandleVerifyCheckpointUrl(CtxPtr ctx) {
  if (!IsPlainId(ctx->args[0])) return Plan::Fail(Status::NotFound("no such verification"));
  int64_t epoch = 0;
  Status body = ReadEpochOnly(ctx->body, &epoch);
  if (!body.ok()) return Plan::Fail(body);
  return Plan::Run(ReadVerification(ctx->args[0]), [ctx, epoch](BatchResult res) -> Plan {
    if (!res.status.ok()) return DbFail(res.status);
    const Rows& v = res.results[0];
    Status st = ExplainVerificationLease(v, *ctx, epoch);
    if (!st.ok()) return Plan::Fail(st);
    std::string key = VerificationKey(v.Get(0, "job_id").AsText(), ctx->args[0], epoch);
    return RespondPutUrl(*ctx, key, ctx->config->max_checkpoint_bytes);
  });
}

// {epoch, sha256, size, outputs?} -> {committed: true, id, step}. With the built-in store the
// object must be stored at the verification's key with this sha256 and size. A replay of the last
// segment (its trainer committed outputs) carries the outputs its own replay exported, and only
// such a replay does (400 otherwise); the objects themselves are not uploaded, their sha256 is
// what is compared. The verdict is not told to the verifier; the job's events show it. The
// uploaded object is deleted once judged.
Plan HandleVerifyCommit(CtxPtr ctx) {
  if (!IsPlainId(ctx->args[0])) return Plan::Fail(Status::NotFound("no such verification"));
  FieldReader r(ctx->body);
  static const char* const kKeys[] = {"epoch", "sha256", "size", "outputs", nullptr};
  r.OnlyKeys(kKeys);
  int64_t epoch = 0, size = 0;
  std::string sha;
  ReadEpoch(r, &epoch);
  r.String("sha256", &sha, true, 64);
  r.Int("size", &size, true, 0, ctx->config->max_checkpoint_bytes);
  if (r.ok() && !IsSha256Hex(sha)) r.Fail("sha256 must be 64 lowercase hex characters");
  if (!r.ok()) return Plan::Fail(r.status());
  std::vector<OutputFile> files;
  Status read = ReadOutputFiles(ctx->body, "outputs", ctx->config->max_output_bytes, &files);
  if (!read.ok() && read.code() != Code::kNotFound) return Plan::Fail(read);
  const SqlValue outputs = read.ok() ? SqlValue(CanonicalOutputs(files)) : SqlValue();
  const std::string& id = ctx->args[0];
  const int64_t now = ctx->now();
  const bool builtin = !ctx->config->s3.enabled();
  const std::string nonce = DeriveHex(ctx->req.entropy, "verify-commit");
  Fence f = LeaseFence(*ctx, epoch);
  std::string stored = builtin ? std::string(" AND EXISTS (SELECT 1 FROM blobs WHERE key = ") +
                                     kVerificationKeySql + " AND sha256 = ? AND size = ?)"
                               : "";
  std::vector<SqlValue> sp =
      builtin ? std::vector<SqlValue>{epoch, sha, size} : std::vector<SqlValue>{};
  // The row this request finished, with its verdict: "SELECT <cols> FROM <kThis> AND verdict".
  const std::string kThis = "verifications WHERE lease_nonce = ?";
  // The bad checkpoint is still the job's: the rewind's guard.
  const std::string still_bad =
      "EXISTS (SELECT 1 FROM checkpoints c, verifications v WHERE v.lease_nonce = ? AND "
      "v.verdict IN ('trainer_bad', 'no_majority') AND c.job_id = v.job_id AND c.step = v.step "
      "AND c.sha256 = v.claimed_sha256)";
  const std::string bad_job = "(SELECT job_id FROM " + kThis + ")";
  const std::string bad_step = "(SELECT step FROM " + kThis + ")";
  Batch b;
  // 0: finish the row under the fence, with its verdict (outputs exactly for the last segment).
  b.Add(
      "UPDATE verifications SET state = 'done', lease_nonce = ?, result_sha256 = ?, "
      "result_outputs = ?, ended_at = ?, billed_ms = ? - started_at, verdict = " +
          std::string(kVerdictSql) + " WHERE " + f.sql +
          " AND (claimed_outputs IS NULL) = (? IS NULL)" + stored +
          " RETURNING job_id, round, step, verdict",
      Cat(Cat(Cat({nonce, sha, outputs, now, now, sha, outputs, sha, outputs, sha, outputs},
                  f.params),
              {outputs}),
          sp));
  // 1: disagree -> a third node replays the segment.
  b.Add(
      "INSERT INTO verifications (id, job_id, round, step_from, from_key, from_sha256, "
      "from_size, step, claimed_sha256, claimed_outputs, trainer_node, trainer_gpu, "
      "trainer_class, other_node, other_sha256, other_outputs, state, created_at) SELECT ?, "
      "job_id, 2, step_from, from_key, from_sha256, from_size, step, claimed_sha256, "
      "claimed_outputs, trainer_node, trainer_gpu, trainer_class, node_id, result_sha256, "
      "result_outputs, 'pending', ? FROM " +
          kThis + " AND verdict = 'disagree'",
      {NewId(ctx->req.entropy, "v"), now, nonce});
  // 2, 3: the minority node is quarantined (and a bad trainer banned from the job).
  b.Add(QuarantineSql("'verification: ' || (SELECT CASE verdict WHEN 'trainer_bad' THEN "
                      "'trained' ELSE 'replayed' END || ' checkpoint ' || step || ' of job ' || "
                      "job_id || ' unlike two other nodes' FROM " +
                          kThis + ")",
                      "SELECT CASE verdict WHEN 'trainer_bad' THEN trainer_node ELSE other_node "
                      "END FROM " +
                          kThis + " AND verdict IN ('trainer_bad', 'verifier_bad')"),
        {now, nonce, nonce});
  b.Add(
      "INSERT INTO job_bans (job_id, node_id, reason, at) SELECT job_id, trainer_node, "
      "'failed verification', ? FROM " +
          kThis + " AND verdict = 'trainer_bad' ON CONFLICT DO NOTHING",
      {now, nonce});
  // 4-6: the rewind, each guarded by still_bad (checked before 7 and 8 delete the checkpoints).
  b.Add(
      "UPDATE segments SET ended_at = ?, end_reason = 'rewound' WHERE ended_at IS NULL AND "
      "job_id = " +
          bad_job + " AND " + still_bad,
      {now, nonce, nonce});
  b.Add(
      "UPDATE verifications SET state = 'void', ended_at = ? WHERE state IN ('pending', "
      "'running') AND job_id = " +
          bad_job + " AND step > " + bad_step + " AND " + still_bad,
      {now, nonce, nonce, nonce});
  b.Add(
      "UPDATE jobs SET state = 'pending', node_id = NULL, lease_expires_at = NULL, outputs = "
      "NULL, finished_at = NULL, updated_at = ?, "
      "ckpt_step = (SELECT CASE WHEN from_key IS NULL THEN NULL ELSE step_from END FROM " +
          kThis + "), ckpt_key = (SELECT from_key FROM " + kThis +
          "), ckpt_sha256 = (SELECT from_sha256 FROM " + kThis +
          "), ckpt_size = (SELECT from_size FROM " + kThis +
          "), step_done = (SELECT step_from FROM " + kThis +
          "), ckpt_committed_at = (SELECT c.committed_at FROM checkpoints c, verifications v "
          "WHERE v.lease_nonce = ? AND c.job_id = v.job_id AND c.step = v.step_from) "
          "WHERE id = " +
          bad_job + " AND state IN ('pending', 'running', 'verifying', 'completed') AND " +
          still_bad,
      {now, nonce, nonce, nonce, nonce, nonce, nonce, nonce, nonce});
  // 7: the leases that started at or after the rewind's checkpoint are rework, billed apart
  // from the job's training (one that started before it keeps its earlier checkpoints in the
  // lineage: taint.h relies on that).
  b.Add("UPDATE segments SET rework = 1 WHERE rework = 0 AND job_id = " + bad_job +
            " AND step_start >= (SELECT step_from FROM " + kThis + ") AND " + still_bad,
        {nonce, nonce, nonce});
  // 8, 9: the checkpoints from the bad one on are discarded (objects deleted after the answer).
  const std::string discarded = "SELECT key FROM checkpoints WHERE job_id = " + bad_job +
                                " AND step >= " + bad_step + " AND " + still_bad;
  b.Add("DELETE FROM blobs WHERE key IN (" + discarded + ")", {nonce, nonce, nonce});
  b.Add("DELETE FROM checkpoints WHERE key IN (" + discarded + ") RETURNING key",
        {nonce, nonce, nonce});
  const size_t rewound_index = b.statements.size() - 1;
  // The quarantined forger's other work is distrusted too (taint.h).
  const size_t tainted_index = AddTaintRewind(&b, nonce, now);
  // A 'verifying' job whose last segment's replay agreed is released.
  b.Add(kReleaseVerifiedSql, {now, now});
  // The replayed checkpoint is judged: its object goes too.
  b.Add(std::string("DELETE FROM blobs WHERE key = (SELECT ") + kVerificationKeySql + " FROM " +
            kThis + ") RETURNING key",
        {epoch, nonce});
  const size_t judged_index = b.statements.size() - 1;
  b.Add(std::string("SELECT ") + kVerificationLeaseColumns + " FROM verifications WHERE id = ?",
        {id});
  const size_t row_index = b.statements.size() - 1;
  b.Add("SELECT size, sha256 FROM blobs WHERE key = (SELECT " + std::string(kVerificationKeySql) +
            " FROM verifications WHERE id = ?)",
        {epoch, id});
  return Plan::Run(
      std::move(b),
      [ctx, epoch, sha, size, builtin, outputs, rewound_index, tainted_index, judged_index,
       row_index](BatchResult res) -> Plan {
        if (!res.status.ok()) return DbFail(res.status);
        std::vector<std::string> deletes;
        for (size_t i : {rewound_index, tainted_index, judged_index}) {
          for (const auto& row : res.results[i].rows) deletes.push_back(row[0].AsText());
        }
        auto respond = [&](Plan p) { return std::move(p).WithBlobDeletes(deletes); };
        const Rows& done = res.results[0];
        if (!done.empty()) {
          return respond(RespondJson(
              200,
              {{"committed", true}, {"id", ctx->args[0]}, {"step", done.Get(0, "step").AsInt()}}));
        }
        const Rows& v = res.results[row_index];
        // A retried commit of the same result: already done.
        if (HeldBy(v, *ctx, epoch) && v.Get(0, "state").AsText() == "done" &&
            v.Get(0, "result_sha256").AsText() == sha &&
            v.Get(0, "result_outputs").AsText() == outputs.AsText()) {
          return respond(RespondJson(200, {{"committed", true}, {"id", ctx->args[0]}}));
        }
        Status st = ExplainVerificationLease(v, *ctx, epoch);
        if (!st.ok()) return respond(Plan::Fail(st));
        const bool last_segment = v.Get(0, "last_segment").AsInt() == 1;
        if (last_segment && outputs.is_null()) {
          return respond(Plan::Fail(Status::Invalid(
              "this replay ends at the job's last step: commit the outputs it exported too")));
        }
        if (!last_segment && !outputs.is_null()) {
          return respond(Plan::Fail(
              Status::Invalid("outputs come only with a replay of the job's last segment")));
        }
        const Rows& blob = res.results[row_index + 1];
        if (builtin && (blob.empty() || blob.Get(0, "sha256").AsText() != sha ||
                        blob.Get(0, "size").AsInt() != size)) {
          return respond(Plan::Fail(Status::Invalid(
              blob.empty() ? "no object is stored at the verification's key; upload it first"
                           : "the object stored at the verification's key has a different sha256 "
                             "or size")));
        }
        return respond(Plan::Fail(Status::Conflict("commit raced with another change; retry")));
      });
}

}  // namespace gleaner::core
