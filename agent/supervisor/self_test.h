// `gleaner-agent --self-test [flags]`: what a freshly downloaded agent must pass before the
// updater switches to it (updater.h). Bounded in time (about 40 s at most): it starts, reaches
// the coordinator (GET /healthz), and runs a tiny synthetic job locally through the trainer
// (3 steps in a scratch directory under the state dir, output verified against the hash chain
// of agent/protocol/synthetic_chain.h; the specs and command lines built by TrainerSpec as the
// job runner builds them).
// It never registers, claims work or touches the agent's own state files.
#pragma once

#include "agent/supervisor/config.h"
#include "shared/native/http_client.h"

namespace gleaner::agent {

// Returns the process exit code: 0 healthy, 1 not (one line on stderr saying why).
int RunSelfTest(const AgentConfig& config, net::HttpClient* http);

}  // namespace gleaner::agent
