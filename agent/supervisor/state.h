// The agent's state directory (layout in docs/agent.md):
//   identity.json  {"machine_id","node_id","token","node_secret","coordinator","gpu":{...}}  0600
//   current_job.json  the job this agent holds: {"job_id","epoch","pending":[{step,archive,
//                     sha256,size}]} — checkpoint uploads not yet committed
//   cache/         content-addressed inputs (cache.h)
//   jobs/<job>-<epoch>/  work directory of the running job
//   job-cache/<job>/     what the job's trainer keeps across its leases here (job_cache.h)
//   (owner.json, lifetime.json and control.sock belong to owner_gate.h, status_board.h and
//   control_socket.h)
// Every write is durable (temp + fsync + rename + fsync dir). Thread-safe.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "agent/protocol/trainer_protocol.h"
#include "shared/status.h"

namespace gleaner::agent {

struct Identity {
  std::string machine_id, node_id, token, coordinator;
  // Proves this agent is the node on re-registration (returned once by the first one; empty in
  // files written before node secrets existed).
  std::string node_secret = "";
  // The GPU advertised at registration (after the owner's VRAM ceiling); -1 = not recorded.
  std::string gpu_name = "";
  int64_t vram_mb = -1;
};

struct PendingUpload {
  int64_t step = 0;
  std::string archive;  // absolute path of the packed checkpoint
  std::string sha256;
  int64_t size = 0;
  // The checkpoint of the last step: the output files it exports to (its manifest's
  // meta.outputs), committed with it. Empty for every other checkpoint.
  std::vector<ManifestFile> outputs;
};

struct CurrentJob {
  std::string job_id;
  int64_t epoch = 0;
  std::vector<PendingUpload> pending;
};

class StateDir {
 public:
  explicit StateDir(std::string dir) : dir_(std::move(dir)) {}
  Status Init();  // creates the directory (0700) and its subdirectories
  const std::string& dir() const { return dir_; }
  std::string CacheDir() const;
  std::string JobDir(const std::string& job_id, int64_t epoch) const;
  std::string JobCacheRoot() const;
  std::string JobCacheDir(const std::string& job_id) const;

  Result<std::optional<Identity>> LoadIdentity();
  Status SaveIdentity(const Identity& id);

  Result<std::optional<CurrentJob>> LoadCurrentJob();
  Status SaveCurrentJob(const CurrentJob& job);
  Status ClearCurrentJob();
  // Adds / removes one pending upload of the current job (read-modify-write under a lock).
  Status AddPending(const std::string& job_id, int64_t epoch, const PendingUpload& p);
  Status RemovePending(const std::string& job_id, int64_t epoch, int64_t step);

 private:
  std::string dir_;
  std::mutex mu_;
};

// SALAD_MACHINE_ID, else a hash of the machine id file (never the raw id); "" when neither
// exists. (--machine-id / GLEANER_MACHINE_ID override this in the config.)
std::string DetectMachineId(const std::string& machine_id_file = "/etc/machine-id");

}  // namespace gleaner::agent
