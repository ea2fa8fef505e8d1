// Verified training by replay spot checks: the pure decisions (docs/architecture.md
// "Verified training"). The routes that act on them are routes_verify.cc (the verifier's lease),
// routes_work.cc (the claim hands out a verification when no job is claimable) and
// routes_lease.cc (a checkpoint commit may open one).
//
// A committed checkpoint (step k+m) is picked with the job's verify_fraction, from the shell's
// per-request entropy (the core draws no randomness of its own): the node that committed it
// cannot predict or influence the pick. Another node resumes from the previous committed
// checkpoint (k), trains to k+m and uploads its checkpoint; the two sha256 are compared. The
// last segment also compares outputs: the trainer committed the checkpoint of the last step with
// the files it exports to (outputs.h), the verifier exports its own replay and commits those.
// Equality is exact: it holds where the trainer's resume is bit-exact (the synthetic kind and
// lora-sd on CPU). Other device pairs need a tolerance that is not measured yet, so the kinds
// and devices a deployment verifies must be exact ones.
#pragma once

#include <cstdint>
#include <string>

namespace gleaner::core {

// A uniform draw in [0, 1) from the entropy (53 bits of SHA-256(entropy || "verify-pick")):
// a commit is replayed when the draw is below the job's verify_fraction (compared in SQL, where
// the fraction is).
double VerificationDraw(const std::string& entropy);

// The verdict of a finished replay, from what the verifier's checkpoint hashed to and the
// outputs it exported (NULL but for the last segment; canonical text, outputs.h), as SQL over a
// verifications row (it is decided inside the commit's batch; parameters: (sha256, outputs) x3).
// Two results are the same when both the sha256 and the outputs are:
//   agree         round 1, same as the trainer's: the segment is verified;
//   disagree      round 1, differs: a third node replays it (round 2);
//   trainer_bad   round 2, same as the first verifier's: the trainer is quarantined;
//   verifier_bad  round 2, same as the trainer's: the first verifier is quarantined;
//   no_majority   round 2, three different results: the segment is not trusted.
extern const char* const kVerdictSql;

// Where a verifier uploads its checkpoint: jobs/<job>/verify/<verification>/e<epoch>.
std::string VerificationKey(const std::string& job, const std::string& verification, int64_t epoch);
// The same key as an SQL expression over a verifications row (columns job_id, id) and one
// parameter, the epoch.
extern const char* const kVerificationKeySql;

// SQL over a jobs row: a replay of its last segment is still open (pending or running). A job
// with verify_fraction > 0 completes as 'verifying' while one is.
extern const char* const kLastReplayOpenSql;

// One statement (parameters: finished_at, updated_at) that releases every 'verifying' job whose
// last segment has no open replay left: it agreed (round 1, or round 2 with the trainer), or
// could not be checked (round 1 unverifiable). A replay that condemned the segment rewound the
// job first, in the same batch, so it is no longer 'verifying'. A disputed one (round 1
// disagreed) whose round 2 was voided unjudged is never released: the job stays 'verifying'
// for an operator (a round 2 is never marked unverifiable; it waits for a third node). Only a
// round 2 opened after the job's current last checkpoint was committed counts: one of an
// earlier lineage (voided by a rewind) is not about the checkpoint the job holds now.
extern const char* const kReleaseVerifiedSql;

}  // namespace gleaner::core
