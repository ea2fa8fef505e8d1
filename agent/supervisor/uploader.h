// Background, in-order checkpoint uploads for one lease: pack the checkpoint directory into one
// archive (archive.h), record it as pending in the state dir, then
//   POST /checkpoints {epoch, step} -> url; PUT archive; POST /checkpoints/{step}/commit (with
//   the outputs the checkpoint records in its manifest's meta.outputs: the last step's).
// Transient failures are retried (whole object: the built-in store and S3 presigned PUTs take
// one object per URL); 409 means the lease is gone: the queue is dropped and lease_lost() is set.
// Keeps the newest `keep` committed checkpoints on disk. Training never waits for it.
// Sample sets (agent/protocol/sample_set.h) travel the same queue, after the checkpoint they
// followed: POST /samples per image -> url; PUT; then POST /samples/{step}/commit; the set's
// directory is removed once committed. A set that fails verification is dropped (logged).
// Thread-safe; one worker thread owned by the object.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "agent/supervisor/api.h"
#include "agent/supervisor/state.h"
#include "agent/supervisor/stop.h"

namespace gleaner::agent {

class CheckpointUploader {
 public:
  CheckpointUploader(CoordinatorApi* api, StateDir* state, std::string job_id, int64_t epoch,
                     std::string work_dir, int keep);
  ~CheckpointUploader();  // Abort()s and joins

  // Queues checkpoint directory `dir` for `step` (steps must increase).
  void Enqueue(int64_t step, const std::string& dir);
  // Queues an archive packed before a restart (recovery): it is uploaded only if it still has
  // the recorded size and sha256, else dropped.
  void EnqueuePacked(const PendingUpload& p);
  // Queues the sample set in directory `dir` for `step`.
  void EnqueueSamples(int64_t step, const std::string& dir);
  // Drops queued checkpoints of steps before `step` (not sample sets): the checkpoint of the
  // last step supersedes them (and must be committed before the job completes).
  void DropCheckpointsBefore(int64_t step);
  // Waits until everything queued is committed or dropped, at most timeout_s. True if drained.
  bool Drain(double timeout_s);
  // Stops retrying and drops what is left (it stays recorded in the state dir).
  void Abort();
  bool lease_lost() const { return lease_lost_; }
  int64_t last_committed() const { return last_committed_; }

 private:
  struct Item {
    int64_t step = 0;
    std::string dir;  // "" when already packed
    PendingUpload packed;
    bool samples = false;  // dir is a sample set
  };
  void Loop();
  Status Upload(Item* item);
  Status UploadSamples(const Item& item);
  void Prune();

  CoordinatorApi* api_;
  StateDir* state_;
  std::string job_id_;
  int64_t epoch_;
  std::string work_dir_;
  int keep_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
  bool busy_ = false;
  bool quit_ = false;
  StopToken abort_;
  std::atomic<bool> lease_lost_{false};
  std::atomic<int64_t> last_committed_{-1};
  std::deque<int64_t> committed_;  // worker thread only
  std::thread thread_;
};

}  // namespace gleaner::agent
