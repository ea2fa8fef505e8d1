#include "coordinator/core/taint.h"

namespace gleaner::core {

const char* const kReopenedMessage = "reopened: a node in this job's lineage was found forging";

size_t AddTaintRewind(Batch* b, const std::string& nonce, int64_t now) {
  // The quarantined forger of the row this commit finished (none for other verdicts).
  const std::string bad =
      "(SELECT CASE verdict WHEN 'trainer_bad' THEN trainer_node ELSE other_node END AS node "
      "FROM verifications WHERE lease_nonce = ?1 AND verdict IN ('trainer_bad', "
      "'verifier_bad'))";
  // Where its work in job j starts: the first step of a segment of it whose work is still in
  // the lineage (not discarded as rework) and that committed a checkpoint or is still open.
  const std::string start =
      "(SELECT MIN(s.step_start) FROM segments s WHERE s.job_id = j.id AND s.node_id = b.node "
      "AND s.rework = 0 AND (s.step_committed > s.step_start OR s.ended_at IS NULL))";
  // 0: the set: each job the forger's work reached, and the newest checkpoint at or before it
  // (0: from scratch), where there is anything to undo. Driven from the forger's leases
  // (segments_node), one row per lease: a job's duplicates are dropped by the primary key.
  b->Add(
      "INSERT INTO taint_rewinds (nonce, job_id, node_id, step) SELECT ?1, t.id, t.node, t.step "
      "FROM (SELECT j.id, b.node, j.state, j.node_id, j.ckpt_step, (SELECT COALESCE(MAX(c.step), "
      "0) FROM checkpoints c WHERE c.job_id = j.id AND c.step <= " +
          start + ") AS step FROM " + bad +
          " b JOIN segments s0 ON s0.node_id = b.node AND s0.rework = 0 JOIN jobs j ON j.id = "
          "s0.job_id WHERE j.state IN ('pending', 'running', 'verifying', 'completed') AND " +
          start +
          " IS NOT NULL) t WHERE COALESCE(t.ckpt_step, 0) > t.step OR t.state <> 'pending' "
          "ON CONFLICT DO NOTHING",
      {nonce});
  const std::string in_set = "SELECT job_id FROM taint_rewinds WHERE nonce = ?1";
  // 1: completed and verifying jobs are reopened, naming what they had released.
  b->Add(
      "INSERT INTO job_reopens (job_id, at, node_id, step, outputs) SELECT r.job_id, ?2, "
      "r.node_id, r.step, CASE WHEN j.state = 'completed' THEN j.outputs END FROM "
      "taint_rewinds r JOIN jobs j ON j.id = r.job_id WHERE r.nonce = ?1 AND j.state IN "
      "('completed', 'verifying') ON CONFLICT DO NOTHING",
      {nonce, now});
  // 2: replays of checkpoints past the rewind are void.
  b->Add(
      "UPDATE verifications SET state = 'void', ended_at = ?2 WHERE state IN ('pending', "
      "'running') AND EXISTS (SELECT 1 FROM taint_rewinds r WHERE r.nonce = ?1 AND r.job_id = "
      "verifications.job_id AND verifications.step > r.step)",
      {nonce, now});
  // 3, 4: the open lease ends; the leases that started at or after the rewind's checkpoint are
  // rework (one that started before it keeps checkpoints in the lineage, so it stays a lease
  // of the job: the taint of a later forger must still find it).
  b->Add(
      "UPDATE segments SET ended_at = ?2, end_reason = 'rewound' WHERE ended_at IS NULL AND "
      "job_id IN (" +
          in_set + ")",
      {nonce, now});
  b->Add(
      "UPDATE segments SET rework = 1 WHERE rework = 0 AND EXISTS (SELECT 1 FROM taint_rewinds "
      "r WHERE r.nonce = ?1 AND r.job_id = segments.job_id AND segments.step_start >= r.step)",
      {nonce});
  // 5: the job resumes from the rewind's checkpoint.
  const std::string ck =
      " FROM checkpoints c, taint_rewinds r WHERE r.nonce = ?1 AND r.job_id = jobs.id AND "
      "c.job_id = jobs.id AND c.step = r.step)";
  b->Add(
      "UPDATE jobs SET state = 'pending', node_id = NULL, lease_expires_at = NULL, outputs = "
      "NULL, finished_at = NULL, updated_at = ?2, ckpt_step = (SELECT c.step" +
          ck + ", ckpt_key = (SELECT c.key" + ck + ", ckpt_sha256 = (SELECT c.sha256" + ck +
          ", ckpt_size = (SELECT c.size" + ck + ", ckpt_committed_at = (SELECT c.committed_at" +
          ck +
          ", step_done = (SELECT r.step FROM taint_rewinds r WHERE r.nonce = ?1 AND r.job_id "
          "= jobs.id) WHERE id IN (" +
          in_set + ") AND state IN ('pending', 'running', 'verifying', 'completed')",
      {nonce, now});
  // 6, 7: the checkpoints past it are discarded (objects deleted after the answer).
  const std::string past =
      "EXISTS (SELECT 1 FROM taint_rewinds r WHERE r.nonce = ?1 AND r.job_id = "
      "checkpoints.job_id AND checkpoints.step > r.step)";
  b->Add("DELETE FROM blobs WHERE key IN (SELECT key FROM checkpoints WHERE " + past + ")",
         {nonce});
  b->Add("DELETE FROM checkpoints WHERE " + past + " RETURNING key", {nonce});
  const size_t deleted = b->statements.size() - 1;
  b->Add("DELETE FROM taint_rewinds WHERE nonce = ?1", {nonce});
  return deleted;
}

}  // namespace gleaner::core
