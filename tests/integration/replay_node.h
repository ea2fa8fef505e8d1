// ReplayNode: a node that speaks the coordinator's node protocol (claim, heartbeat, checkpoint
// URL + PUT + commit, outputs, complete; verification leases: heartbeat, checkpoint URL + PUT +
// commit) around an exact stand-in trainer, for tests and benchmarks of verified training
// (docs/architecture.md "Verified training").
//
// The stand-in trainer is a hash chain: state(0) = SHA-256("init " + job), state(s) =
// SHA-256(state(s-1) + " " + s). A checkpoint at step s is the text
// "replay-ckpt <job> <s> <hex state(s)>", the output "replay-out <job> <hex state(steps)>"
// (out.txt), the export of the last step's checkpoint: that checkpoint is committed with it, and
// a replay of the last segment commits the output it exported too. Resuming from a checkpoint
// gives bit-exact results, like the synthetic kind or lora-sd on CPU.
//
// TEST ONLY: a dishonest node forges what it uploads, as its trainer and as a verifier:
//   kPerturb    the checkpoint's state with bits flipped, in a pattern of the node's own
//               (corrupt weights, a broken GPU; two such nodes never agree);
//   kOtherJob   the honest checkpoint of another job at the same step (a result it did not
//               compute for this job);
//   kSkipSteps  every other step skipped (less work than paid for);
//   kForgeOutput honest checkpoints, but an output that is not their export (a result swapped
//               at the end), committed with the last checkpoint and completed with.
// Nothing outside tests builds this: the agent and trainer have no dishonest mode.
//
// One action per Step() call (poll for work, train one checkpoint interval, replay a segment,
// finish), so a single test thread interleaves many nodes deterministically. Not thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "shared/json.h"
#include "tests/integration/harness.h"

namespace gleaner::testing {

enum class Forgery { kNone, kPerturb, kOtherJob, kSkipSteps, kForgeOutput };

// A checkpoint a node committed (as trainer) or replayed (as verifier).
struct Upload {
  std::string job;
  int64_t step = 0;
  std::string sha256;
  bool forged = false;  // forged by a dishonest node (kForgeOutput: only the last step's)
  bool verification = false;
  Json outputs;  // the last step's: the outputs committed with it (else null)
};

class ReplayNode {
 public:
  // `client` carries the node's token; checkpoint_every is the jobs' checkpoint interval.
  ReplayNode(std::string id, HttpClient client, Forgery forgery, int64_t checkpoint_every);

  // One action. False with *error on an unexpected answer (409 on a lost lease is expected:
  // the node drops the work and polls again).
  bool Step(std::string* error);

  const std::string& id() const { return id_; }
  Forgery forgery() const { return forgery_; }
  bool idle() const { return !work_.has_value(); }
  // Every checkpoint the coordinator accepted from this node.
  const std::vector<Upload>& uploads() const { return uploads_; }
  // 204 with Gleaner-Node-State: quarantined was seen.
  bool saw_quarantine() const { return saw_quarantine_; }
  int64_t verifications_done() const { return verifications_done_; }
  // Steps computed under job leases and under verification leases (the work a fleet pays for).
  int64_t steps_trained() const { return steps_trained_; }
  int64_t steps_replayed() const { return steps_replayed_; }

  // The honest checkpoint text of `job` at `step`, and the honest output's text.
  static std::string HonestCheckpoint(const std::string& job, int64_t step);
  static std::string HonestOutput(const std::string& job, int64_t steps);

 private:
  struct Work {
    Json claim;
    std::string job, verification;  // verification: "" for a training lease
    int64_t epoch = 0, steps = 0, stop_step = 0, step = 0;
    std::string state;  // raw 32-byte chain state at `step`
  };
  bool Poll(std::string* error);
  bool Advance(std::string* error);
  bool Finish(std::string* error);
  // Checkpoint text for the current state, forged as this node forges.
  std::string CheckpointText(const Work& w) const;
  // The output text of the current state (the last step's export), forged as this node forges.
  std::string OutputText(const Work& w) const;
  // [{name: out.txt, sha256, size}] of OutputText.
  Json OutputList(const Work& w) const;
  // POST url_path (-> a PUT URL), PUT text, POST commit_path with its sha256 and size.
  bool PutAndCommit(const std::string& url_path, const Json& url_body,
                    const std::string& commit_path, Json commit_body, const std::string& text,
                    std::string* error);
  // Drops the work on 409 (true) or reports any other non-2xx (false).
  bool Expected(const HttpResult& r, const char* what, std::string* error);

  std::string id_;
  HttpClient client_;
  Forgery forgery_;
  int64_t every_;
  std::optional<Work> work_;
  std::vector<Upload> uploads_;
  bool saw_quarantine_ = false;
  int64_t verifications_done_ = 0;
  int64_t steps_trained_ = 0, steps_replayed_ = 0;
};

}  // namespace gleaner::testing
