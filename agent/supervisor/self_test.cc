#include "agent/supervisor/self_test.h"

#include <sys/wait.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "agent/protocol/checkpoint_dir.h"
#include "agent/protocol/synthetic_chain.h"
#include "agent/protocol/trainer_spec.h"
#include "agent/supervisor/child_process.h"
#include "agent/supervisor/log.h"
#include "shared/json.h"
#include "shared/native/files.h"

namespace gleaner::agent {
namespace {

constexpr int kHealthTimeoutMs = 10000;
constexpr int kTrainerTimeoutMs = 30000;
constexpr int64_t kSteps = 3;

Status ReachCoordinator(const AgentConfig& config, net::HttpClient* http) {
  net::HttpCall call;
  call.url = config.coordinator;
  while (!call.url.empty() && call.url.back() == '/') call.url.pop_back();
  call.url += "/healthz";
  call.timeout_ms = kHealthTimeoutMs;
  Result<net::HttpResponse> r = http->Send(call);
  if (!r.ok()) return Status::Unavailable("coordinator unreachable: " + r.status().message());
  if (r->status != 200) {
    return Status::Unavailable("coordinator /healthz answered " + std::to_string(r->status));
  }
  return Status::Ok();
}

// Runs the trainer to its end: ok when it exits 0.
Status RunTrainer(const std::vector<std::string>& argv) {
  auto quiet = [](const std::string&) {};
  Result<std::unique_ptr<ChildProcess>> child = ChildProcess::Start(argv, quiet, quiet);
  if (!child.ok()) return Status::Internal("cannot start the trainer: " + child.status().message());
  int wait_status = 0;
  if (!(*child)->WaitFor(kTrainerTimeoutMs, &wait_status)) {
    return Status::Internal("the trainer did not finish a " + std::to_string(kSteps) +
                            "-step job in " + std::to_string(kTrainerTimeoutMs / 1000) + " s");
  }
  if (!WIFEXITED(wait_status) || WEXITSTATUS(wait_status) != 0) {
    return Status::Internal("the trainer ended with " + DescribeWaitStatus(wait_status));
  }
  return Status::Ok();
}

Status TinyJob(const AgentConfig& config, const std::string& dir) {
  Status s = files::MakeDirs(dir, 0700);
  if (!s.ok()) return s;
  // Specs and command lines as the job runner makes them (TrainerSpec: --cache-dir included; a
  // replay's --stop-at-step), so a trainer too old for this agent fails here rather than every
  // job.
  TrainerSpec spec;
  spec.job_id = "self-test";
  spec.kind = "synthetic";
  spec.params = {{"steps", kSteps}, {"checkpoint_every", 2}};
  spec.steps = kSteps;
  spec.epoch = 1;
  TrainerSpec replay_spec = spec;
  replay_spec.stop_at_step = 2;
  const std::string spec_path = files::Join(dir, "SPEC.json");
  const std::string replay_path = files::Join(dir, "SPEC.replay.json");
  s = files::WriteDurable(spec_path, DumpJson(spec.ToJson()));
  if (s.ok()) s = files::WriteDurable(replay_path, DumpJson(replay_spec.ToJson()));
  if (!s.ok()) return s;
  s = RunTrainer(spec.CommandLine(config.trainer, spec_path, dir, dir + "/cache"));
  if (!s.ok()) return s;
  const std::string replay = files::Join(dir, "replay");
  s = RunTrainer(replay_spec.CommandLine(config.trainer, replay_path, replay, dir + "/cache"));
  if (!s.ok()) return Status(s.code(), "replay: " + s.message());
  Result<CheckpointManifest> full = train::VerifyCheckpointDir(train::CheckpointDirFor(dir, 2));
  Result<CheckpointManifest> again = train::VerifyCheckpointDir(train::CheckpointDirFor(replay, 2));
  if (!full.ok() || !again.ok() || ManifestToJson(*full) != ManifestToJson(*again)) {
    return Status::Internal("the trainer's replay differs from its run");
  }
  std::string out = train::OutputDirFor(dir);
  Result<CheckpointManifest> m = train::VerifyCheckpointDir(out);
  if (!m.ok()) return Status::Internal("trainer output: " + m.status().message());
  Result<std::string> chain = files::ReadAll(files::Join(out, "chain.txt"), 1024);
  if (!chain.ok() || chain.value() != SyntheticChainHex(0, kSteps) + "\n") {
    return Status::Internal("the trainer's result is wrong");
  }
  // The output is the export of the last step's checkpoint, which records it (the coordinator
  // completes a job only with the outputs that checkpoint was committed with).
  Result<CheckpointManifest> last =
      train::VerifyCheckpointDir(train::CheckpointDirFor(dir, kSteps));
  Result<std::vector<ManifestFile>> recorded =
      last.ok() ? ManifestOutputs(*last) : Result<std::vector<ManifestFile>>(last.status());
  if (!recorded.ok() || !SameFiles(*recorded, m->files)) {
    return Status::Internal("the trainer's last checkpoint does not record its output");
  }
  return Status::Ok();
}

}  // namespace

int RunSelfTest(const AgentConfig& config, net::HttpClient* http) {
  Log("self-test of version %s", config.version.c_str());
  Status s = ReachCoordinator(config, http);
  if (s.ok()) {
    std::string dir = files::Join(config.state_dir, "self-test." + std::to_string(long(getpid())));
    files::RemoveTree(dir);
    s = TinyJob(config, dir);
    files::RemoveTree(dir);
  }
  if (!s.ok()) {
    Log("self-test failed: %s", s.message().c_str());
    return 1;
  }
  Log("self-test passed");
  return 0;
}

}  // namespace gleaner::agent
