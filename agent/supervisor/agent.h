// The agent's main loop: identity (register once), recovery of a job interrupted by a crash,
// then POST /v1/work → run the job → repeat, honouring Retry-After and backing off on errors.
// Returns when a shutdown is requested (after handing back the current job) or, with
// config.once, after one job.
#pragma once

#include "agent/supervisor/config.h"
#include "agent/supervisor/http_client.h"
#include "agent/supervisor/job_runner.h"

namespace gleaner::agent {

// Returns the process exit code.
int RunAgent(const AgentConfig& config, HttpClient* http, ShutdownState* shutdown);

}  // namespace gleaner::agent
