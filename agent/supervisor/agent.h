// The agent's main loop: identity (register once), recovery of a job interrupted by a crash,
// then POST /v1/work → run the job → repeat, honouring Retry-After and backing off on errors.
// Returns when a shutdown is requested (after handing back the current job) or, with
// config.once, after one job.
#pragma once

#include <functional>

#include "agent/supervisor/api.h"
#include "agent/supervisor/config.h"
#include "agent/supervisor/job_runner.h"
#include "shared/native/http_client.h"

namespace gleaner::agent {

// Called between jobs, never mid-job: before each work request (after_job: a job has just
// ended). The self-updater checks for releases here.
using BetweenJobs = std::function<void(CoordinatorApi* api, bool after_job)>;

// Returns the process exit code.
int RunAgent(const AgentConfig& config, net::HttpClient* http, ShutdownState* shutdown,
             const BetweenJobs& between_jobs = nullptr);

}  // namespace gleaner::agent
