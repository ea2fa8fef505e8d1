#include "coordinator/core/verification.h"

#include "coordinator/core/ids.h"

namespace gleaner::core {

double VerificationDraw(const std::string& entropy) {
  // 53 bits (13 hex digits + 1 bit) of the derived value, as a double in [0, 1).
  const std::string hex = DeriveHex(entropy, "verify-pick");
  uint64_t bits = 0;
  for (int i = 0; i < 14; ++i) {
    char c = hex[size_t(i)];
    bits = bits * 16 + uint64_t(c <= '9' ? c - '0' : c - 'a' + 10);
  }
  bits >>= 3;  // 56 -> 53 bits
  return double(bits) / double(uint64_t(1) << 53);
}

const char* const kVerdictSql =
    "CASE WHEN round = 1 THEN (CASE WHEN ? = claimed_sha256 AND ? IS claimed_outputs THEN "
    "'agree' ELSE 'disagree' END) "
    "WHEN ? = claimed_sha256 AND ? IS claimed_outputs THEN 'verifier_bad' "
    "WHEN ? = other_sha256 AND ? IS other_outputs THEN 'trainer_bad' ELSE 'no_majority' END";

std::string VerificationKey(const std::string& job, const std::string& verification,
                            int64_t epoch) {
  return "jobs/" + job + "/verify/" + verification + "/e" + std::to_string(epoch);
}

const char* const kVerificationKeySql =
    "('jobs/' || job_id || '/verify/' || id || '/e' || CAST(? AS TEXT))";

const char* const kLastReplayOpenSql =
    "EXISTS (SELECT 1 FROM verifications lv WHERE lv.job_id = jobs.id AND lv.step = "
    "jobs.steps_total AND lv.state IN ('pending', 'running'))";

const char* const kReleaseVerifiedSql =
    "UPDATE jobs SET state = 'completed', finished_at = ?, updated_at = ? WHERE state = "
    "'verifying' AND NOT EXISTS (SELECT 1 FROM verifications lv WHERE lv.job_id = jobs.id AND "
    "lv.step = jobs.steps_total AND (lv.state IN ('pending', 'running') OR (lv.round = 2 AND "
    "lv.state = 'void' AND lv.claimed_sha256 = jobs.ckpt_sha256 AND lv.created_at >= "
    "jobs.ckpt_committed_at)))";

}  // namespace gleaner::core
