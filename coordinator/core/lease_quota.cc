#include "coordinator/core/lease_quota.h"

#include <algorithm>

namespace gleaner::core {
namespace {

const char* KindText(LeaseObjectKind k) {
  switch (k) {
    case LeaseObjectKind::kCheckpoint:
      return "ckpt";
    case LeaseObjectKind::kOutput:
      return "out";
    case LeaseObjectKind::kSample:
      return "sample";
  }
  return "ckpt";
}

// The objects of lease (?2 job, ?3 epoch) in the same pool as `o`, other than key ?1.
std::string PoolSql(LeaseObjectKind k) {
  return std::string(
             "FROM lease_objects o LEFT JOIN blobs b ON b.key = o.key WHERE o.job_id = ?2 AND "
             "o.epoch = ?3 AND o.key <> ?1 AND ") +
         (k == LeaseObjectKind::kOutput ? "o.kind = 'out'" : "o.kind IN ('ckpt', 'sample')");
}

// The largest PNG a sample image of the job `j` can be: 4 bytes a pixel at its resolution (an
// 8-bit RGB PNG stores 3 and a filter byte a row, stored blocks add 5 bytes in 64 KiB) plus
// 64 KiB of chunks.
const char* const kSampleBoundSql =
    "(COALESCE(json_extract(j.spec, '$.params.sample_resolution'), 512) * "
    "COALESCE(json_extract(j.spec, '$.params.sample_resolution'), 512) * 4 + 65536)";

int64_t PerObjectMax(const CoreConfig& c, LeaseObjectKind k) {
  return k == LeaseObjectKind::kCheckpoint ? c.max_checkpoint_bytes : c.max_output_bytes;
}

int64_t CapBytes(const CoreConfig& c, LeaseObjectKind k) {
  return k == LeaseObjectKind::kOutput ? c.lease_max_output_bytes : c.lease_max_uncommitted_bytes;
}

int64_t CapCount(const CoreConfig& c, LeaseObjectKind k) {
  return k == LeaseObjectKind::kOutput ? c.lease_max_outputs : kMaxUncommittedObjects;
}

// A committed object, over a lease_objects row `o`: a checkpoint or sample image whose commit
// names it, an output the job's result or a checkpoint of its lease names.
const char* const kCommittedSql =
    "(CASE o.kind WHEN 'ckpt' THEN EXISTS (SELECT 1 FROM checkpoints c WHERE c.job_id = "
    "o.job_id AND c.key = o.key) WHEN 'sample' THEN EXISTS (SELECT 1 FROM samples s WHERE "
    "s.job_id = o.job_id AND s.key = o.key) ELSE (EXISTS (SELECT 1 FROM jobs j WHERE j.id = "
    "o.job_id AND instr(j.outputs, '\"' || o.key || '\"') > 0) OR EXISTS (SELECT 1 FROM "
    "checkpoints c WHERE c.job_id = o.job_id AND c.epoch = o.epoch AND instr(c.outputs, "
    "'\"name\":\"' || o.name || '\"') > 0)) END)";

}  // namespace

void AddMint(const Ctx& ctx, const LeaseObject& o, Batch* b) {
  const CoreConfig& c = *ctx.config;
  // ?1 key, ?2 job, ?3 epoch, ?4 node, ?5 now, ?6 kind, ?7 name, ?8 declared size, ?9 per-object
  // limit, ?10 pool bytes, ?11 pool objects, ?12 step, ?13 sample index.
  // What the pool holds (scalar subqueries: the statement reads only the job's row besides).
  const std::string used =
      "(SELECT COALESCE(SUM(COALESCE(b.size, o.max_size)), 0) " + PoolSql(o.kind) + ")";
  const std::string n = "(SELECT count(*) " + PoolSql(o.kind) + ")";
  std::string job_ok;
  std::string size;
  switch (o.kind) {
    case LeaseObjectKind::kCheckpoint:
      job_ok =
          "?12 <= j.steps_total AND (j.ckpt_step IS NULL OR j.ckpt_step < ?12) AND ?13 IS NULL";
      size = "COALESCE(?8, MIN(?9, ?10 - " + used + "))";
      break;
    case LeaseObjectKind::kOutput:
      job_ok = "?12 IS NULL AND ?13 IS NULL";
      size = "COALESCE(?8, MIN(?9, ?10 - " + used + "))";
      break;
    case LeaseObjectKind::kSample:
      job_ok =
          "?12 <= j.steps_total AND ?13 < COALESCE(json_array_length(j.spec, "
          "'$.params.sample_prompts'), 0)";
      size = std::string("COALESCE(?8, MIN(?9, ") + kSampleBoundSql + "))";
      break;
  }
  const bool sample = o.kind == LeaseObjectKind::kSample;
  std::vector<SqlValue> p = {o.key,
                             ctx.args.at(0),
                             o.epoch,
                             ctx.caller.id,
                             ctx.now(),
                             KindText(o.kind),
                             o.kind == LeaseObjectKind::kOutput ? SqlValue(o.name) : SqlValue(),
                             o.declared >= 0 ? SqlValue(o.declared) : SqlValue(),
                             PerObjectMax(c, o.kind),
                             CapBytes(c, o.kind),
                             CapCount(c, o.kind),
                             o.kind == LeaseObjectKind::kOutput ? SqlValue() : SqlValue(o.step),
                             sample ? SqlValue(o.index) : SqlValue()};
  b->Add(
      "INSERT INTO lease_objects (key, job_id, epoch, kind, name, max_size, minted_at) "
      "SELECT ?1, ?2, ?3, ?6, ?7, " +
          size +
          ", ?5 FROM jobs j WHERE j.id = ?2 AND j.lease_epoch = ?3 AND j.node_id = ?4 AND "
          "j.state = 'running' AND j.lease_expires_at >= ?5 AND " +
          job_ok + " AND " + n + " < ?11 AND (?8 IS NOT NULL OR ?10 - " + used + " > 0) AND " +
          used + " + " + size +
          " <= ?10 ON CONFLICT (key) DO UPDATE SET max_size = excluded.max_size, "
          "minted_at = excluded.minted_at RETURNING max_size",
      p);
  b->Add(
      "SELECT COALESCE(SUM(COALESCE(b.size, o.max_size)), 0) AS used, count(*) AS n, "
      "(SELECT " +
          (sample ? std::string(kSampleBoundSql) : std::string("0")) +
          " FROM jobs j WHERE j.id = ?2) AS bound " + PoolSql(o.kind),
      {o.key, ctx.args.at(0), o.epoch});
}

Plan RefuseQuota(const Ctx& ctx, const LeaseObject& o, const Rows& usage) {
  const CoreConfig& c = *ctx.config;
  const int64_t used = usage.Get(0, "used").AsInt();
  const int64_t n = usage.Get(0, "n").AsInt();
  const int64_t cap = CapBytes(c, o.kind);
  const bool out = o.kind == LeaseObjectKind::kOutput;
  const std::string pool = out ? "outputs" : "uncommitted checkpoints and sample images";
  std::string message;
  if (n >= CapCount(c, o.kind)) {
    message = "this lease already holds " + std::to_string(n) + " " + pool + " (limit " +
              std::to_string(CapCount(c, o.kind)) + ")";
  } else {
    int64_t want = o.declared;
    if (want < 0 && o.kind == LeaseObjectKind::kSample) {
      want = std::min(c.max_output_bytes, usage.Get(0, "bound").AsInt());
    }
    message = "this lease's " + pool + " hold " + std::to_string(used) + " of " +
              std::to_string(cap) + " bytes";
    message += want >= 0 ? "; " + std::to_string(want) + " more do not fit" : "; nothing more fits";
  }
  message += out ? "" : " (commit or let maintenance collect what is not committed)";
  return Plan::Respond(ErrorResponse(413, "quota_exceeded", message));
}

void AddCollectUncommitted(const CoreConfig& config, int64_t now_ms, Batch* b) {
  const int64_t old = now_ms - int64_t(config.uncommitted_grace_s * 1000);
  // Outputs of a lease still running stay: its holder may still commit them.
  const std::string due =
      std::string("SELECT o.key FROM lease_objects o WHERE o.minted_at < ? AND NOT ") +
      kCommittedSql +
      " AND NOT (o.kind = 'out' AND EXISTS (SELECT 1 FROM jobs j WHERE j.id = o.job_id AND "
      "j.state = 'running' AND j.lease_epoch = o.epoch)) ORDER BY o.minted_at LIMIT 1000";
  b->Add("DELETE FROM blobs WHERE key IN (" + due + ")", {old});
  b->Add("DELETE FROM lease_objects WHERE key IN (" + due + ") RETURNING key", {old});
  // Committed outputs need no record once their lease is over (checkpoints and samples lose
  // theirs at the commit).
  b->Add(std::string("DELETE FROM lease_objects WHERE key IN (SELECT o.key FROM lease_objects o "
                     "WHERE o.minted_at < ? AND ") +
             kCommittedSql +
             " AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = o.job_id AND j.state = "
             "'running' AND j.lease_epoch = o.epoch) LIMIT 1000)",
         {old});
}

}  // namespace gleaner::core
