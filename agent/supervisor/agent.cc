#include "agent/supervisor/agent.h"

#include <cstdlib>
#include <ctime>

#include "agent/supervisor/api.h"
#include "agent/supervisor/backoff.h"
#include "agent/supervisor/cache.h"
#include "agent/supervisor/control_socket.h"
#include "agent/supervisor/deletion_cost.h"
#include "agent/supervisor/gpu.h"
#include "agent/supervisor/job_cache.h"
#include "agent/supervisor/log.h"
#include "agent/supervisor/owner_gate.h"
#include "agent/supervisor/repro_class.h"
#include "agent/supervisor/state.h"
#include "shared/native/files.h"

namespace gleaner::agent {
namespace {

// Loads the stored identity or registers (retrying transient errors); force: register anew.
Result<Identity> EnsureIdentity(const AgentConfig& config, CoordinatorApi* api, StateDir* state,
                                const ShutdownState* sd, bool force) {
  GpuInfo gpu = DetectGpu(config.owner.gpus);
  gpu.vram_mb = AdvertisedVramMb(gpu.vram_mb, config.owner.max_vram_mb);
  // Reported at registration and with every claim (repro_class.h).
  api->SetReproClass(DetectReproClass(gpu, config.trainer));
  Result<std::optional<Identity>> stored = state->LoadIdentity();
  if (force) {
  } else if (!stored.ok()) {
    Log("state: %s; registering again", stored.status().ToString().c_str());
  } else if (stored->has_value() && (*stored)->coordinator == config.coordinator &&
             (config.machine_id.empty() || (*stored)->machine_id == config.machine_id)) {
    // The advertised GPU (owner's selection and VRAM ceiling) changed: register it anew.
    bool same = (*stored)->vram_mb == gpu.vram_mb && (*stored)->gpu_name == gpu.name;
    if (same || config.enroll_token.empty()) {
      if (!same) Log("GPU or VRAM ceiling changed: needs --enroll-token to register it again");
      return **stored;
    }
    Log("GPU or VRAM ceiling changed (%s, %lld MiB): registering again", gpu.name.c_str(),
        static_cast<long long>(gpu.vram_mb));
  }
  Identity id;
  id.coordinator = config.coordinator;
  id.machine_id = config.machine_id.empty() ? DetectMachineId() : config.machine_id;
  if (id.machine_id.empty()) return Status::Invalid("no machine id: set GLEANER_MACHINE_ID");
  // The node secret proves to the coordinator that this agent is the node it registered
  // before; without it an existing machine_id is refused (409).
  if (stored.ok() && stored->has_value() && (*stored)->machine_id == id.machine_id &&
      (*stored)->coordinator == config.coordinator) {
    id.node_secret = (*stored)->node_secret;
  }
  if (config.enroll_token.empty()) {
    return Status::Invalid("not registered yet and no --enroll-token given");
  }
  id.gpu_name = gpu.name;
  id.vram_mb = gpu.vram_mb;
  Backoff backoff(0.5, 30);
  for (;;) {
    Result<CoordinatorApi::Registration> r = api->Register(
        config.enroll_token, id.machine_id, gpu.name, gpu.vram_mb, config.version, id.node_secret);
    if (r.ok()) {
      id.node_id = r->node_id;
      id.token = r->token;
      if (!r->node_secret.empty()) id.node_secret = r->node_secret;
      GLEANER_RETURN_IF_ERROR(state->SaveIdentity(id));
      Log("registered as node %s (machine %s, gpu %s, %lld MiB)", id.node_id.c_str(),
          id.machine_id.c_str(), gpu.name.c_str(), static_cast<long long>(gpu.vram_mb));
      return id;
    }
    if (r.status().code() != Code::kUnavailable) {
      return Status(r.status().code(), "register: " + r.status().message());
    }
    double d = backoff.Next();
    Log("register: %s (retrying in %.1fs)", r.status().ToString().c_str(), d);
    if (sd->stop.WaitFor(d)) return Status::Unavailable("shutdown before registration");
  }
}

}  // namespace

int RunAgent(const AgentConfig& config, net::HttpClient* http, ShutdownState* sd,
             const BetweenJobs& between_jobs) {
  StateDir state(config.state_dir);
  Status s = state.Init();
  if (!s.ok()) {
    Log("state dir: %s", s.ToString().c_str());
    return 1;
  }
  // Owner controls: the trainer sees only the selected GPUs (indices in PCI bus order, as NVML
  // and nvidia-smi number them); the control socket serves status / pause / resume.
  if (!config.owner.gpus.empty()) {
    setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID", 1);
    setenv("CUDA_VISIBLE_DEVICES", CudaVisibleDevices(config.owner.gpus).c_str(), 1);
  }
  s = sd->board.AttachLifetime(files::Join(state.dir(), "lifetime.json"));
  if (!s.ok()) Log("lifetime counters: %s (starting from zero)", s.ToString().c_str());
  OwnerGate gate(config.owner, MakeSystemReadings(), files::Join(state.dir(), "owner.json"),
                 &sd->board, &sd->hand_back, config.shutdown_deadline_s);
  s = gate.Start();
  if (!s.ok()) Log("owner.json: %s (not paused)", s.ToString().c_str());
  ControlServer control;
  s = control.Start(files::Join(state.dir(), kControlSocketName),
                    [&gate](const std::string& cmd) { return gate.HandleCommand(cmd); });
  if (!s.ok()) Log("control socket: %s (status/pause/resume unavailable)", s.ToString().c_str());

  CoordinatorApi api(http, config.coordinator);
  Result<Identity> id = EnsureIdentity(config, &api, &state, sd, /*force=*/false);
  if (!id.ok()) {
    if (sd->stop.requested()) return 0;
    Log("%s", id.status().ToString().c_str());
    return 1;
  }
  api.SetToken(id->token);
  sd->board.SetNode(id->node_id);
  RecoverPendingJob(&api, &state, sd);
  PruneJobCaches(state.JobCacheRoot(), time(nullptr));
  BlobCache cache(state.CacheDir(), config.cache_max_mb * 1024 * 1024);
  DeletionCost deletion_cost(DeletionCostFromEnv(), http);  // SaladCloud: spare busy instances

  Backoff errors(0.5, std::min(30.0, config.idle_poll_max_s));
  bool reregistered = false, after_job = false;
  while (!sd->stop.requested()) {
    // Wait while the owner controls say no; then forget hand-back requests made while waiting
    // (one made after the check below hands the next job back at once).
    if (!gate.WaitAllowed(sd->stop)) break;
    sd->hand_back.Clear();
    if (!gate.decision().allowed) continue;
    double retry_after = 0;
    if (between_jobs) between_jobs(&api, after_job);
    after_job = false;
    Result<std::optional<Assignment>> work = api.Work(&retry_after, config.verify);
    if (!work.ok()) {
      if (work.status().code() == Code::kUnauthenticated && !reregistered) {
        // Our token was refused (a lost identity file restored from an old copy, or revoked):
        // register anew with the node secret; a revoked node is refused for good.
        Log("work: token refused; registering again");
        id = EnsureIdentity(config, &api, &state, sd, /*force=*/true);
        if (!id.ok()) {
          if (sd->stop.requested()) return 0;
          Log("%s", id.status().ToString().c_str());
          return 1;
        }
        api.SetToken(id->token);
        reregistered = true;
        continue;
      }
      double d = std::max(errors.Next(), retry_after);
      Log("work: %s (retrying in %.2fs)", work.status().ToString().c_str(), d);
      sd->stop.WaitFor(std::min(d, config.idle_poll_max_s));
      continue;
    }
    errors.Reset();
    reregistered = false;
    if (!work->has_value()) {
      double d = retry_after > 0 ? retry_after : 5.0;
      sd->stop.WaitFor(std::min(d, config.idle_poll_max_s));
      continue;
    }
    deletion_cost.SetBusy(true);
    JobOutcome o = RunJob(config, &api, &state, &cache, **work, sd);
    deletion_cost.SetBusy(false);
    Log("job %s: %s", (*work)->job_id.c_str(), JobOutcomeName(o));
    // A hand-back that could not finish in time: finish it before taking other work.
    if (o == JobOutcome::kAbandoned && !sd->stop.requested()) RecoverPendingJob(&api, &state, sd);
    PruneJobCaches(state.JobCacheRoot(), time(nullptr));
    if (config.once) break;
    after_job = true;
  }
  Log("stopped");
  return 0;
}

}  // namespace gleaner::agent
