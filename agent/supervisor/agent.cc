#include "agent/supervisor/agent.h"

#include "agent/supervisor/api.h"
#include "agent/supervisor/backoff.h"
#include "agent/supervisor/cache.h"
#include "agent/supervisor/gpu.h"
#include "agent/supervisor/log.h"
#include "agent/supervisor/state.h"

namespace gleaner::agent {
namespace {

// Loads the stored identity or registers (retrying transient errors); force: register anew.
Result<Identity> EnsureIdentity(const AgentConfig& config, CoordinatorApi* api, StateDir* state,
                                const ShutdownState* sd, bool force) {
  Result<std::optional<Identity>> stored = state->LoadIdentity();
  if (force) {
  } else if (!stored.ok()) {
    Log("state: %s; registering again", stored.status().ToString().c_str());
  } else if (stored->has_value() && (*stored)->coordinator == config.coordinator &&
             (config.machine_id.empty() || (*stored)->machine_id == config.machine_id)) {
    return **stored;
  }
  Identity id;
  id.coordinator = config.coordinator;
  id.machine_id = config.machine_id.empty() ? DetectMachineId() : config.machine_id;
  if (id.machine_id.empty()) return Status::Invalid("no machine id: set GLEANER_MACHINE_ID");
  if (config.enroll_token.empty()) {
    return Status::Invalid("not registered yet and no --enroll-token given");
  }
  GpuInfo gpu = DetectGpu();
  Backoff backoff(0.5, 30);
  for (;;) {
    Result<CoordinatorApi::Registration> r =
        api->Register(config.enroll_token, id.machine_id, gpu.name, gpu.vram_mb, config.version);
    if (r.ok()) {
      id.node_id = r->node_id;
      id.token = r->token;
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

int RunAgent(const AgentConfig& config, HttpClient* http, ShutdownState* sd,
             const BetweenJobs& between_jobs) {
  StateDir state(config.state_dir);
  Status s = state.Init();
  if (!s.ok()) {
    Log("state dir: %s", s.ToString().c_str());
    return 1;
  }
  CoordinatorApi api(http, config.coordinator);
  Result<Identity> id = EnsureIdentity(config, &api, &state, sd, /*force=*/false);
  if (!id.ok()) {
    if (sd->stop.requested()) return 0;
    Log("%s", id.status().ToString().c_str());
    return 1;
  }
  api.SetToken(id->token);
  RecoverPendingJob(&api, &state, sd);
  BlobCache cache(state.CacheDir(), config.cache_max_mb * 1024 * 1024);

  Backoff errors(0.5, std::min(30.0, config.idle_poll_max_s));
  bool reregistered = false, after_job = false;
  while (!sd->stop.requested()) {
    double retry_after = 0;
    if (between_jobs) between_jobs(&api, after_job);
    after_job = false;
    Result<std::optional<Assignment>> work = api.Work(&retry_after);
    if (!work.ok()) {
      if (work.status().code() == Code::kUnauthenticated && !reregistered) {
        // Our token was revoked (the machine registered again elsewhere): register anew.
        Log("work: token refused; registering again");
        id = EnsureIdentity(config, &api, &state, sd, /*force=*/true);
        if (!id.ok()) return sd->stop.requested() ? 0 : 1;
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
    JobOutcome o = RunJob(config, &api, &state, &cache, **work, sd);
    Log("job %s: %s", (*work)->job_id.c_str(), JobOutcomeName(o));
    if (config.once) break;
    after_job = true;
  }
  Log("stopped");
  return 0;
}

}  // namespace gleaner::agent
