// Local provider (the embedded default): gleaner-agent processes on this machine.
//
// Each instance is one agent with its own state dir <dir>/<machine id>/ (pid in agent.pid, log
// in agent.log) and a machine id "local-<start ms>-<n>" never used before, passed as
// --machine-id; the enrolment token goes through the environment (GLEANER_ENROLL_TOKEN), never
// argv. Scaling down and reallocation send SIGTERM (the agent checkpoints and releases its job),
// preferring agents without a current job; an agent still alive `kill_after_s` later gets
// SIGKILL. A new instance replaces every one that exits or is reallocated, while the target
// asks for it. State dirs of exited agents are removed.
// Agents run in their own process group and outlive a coordinator that is killed: a restarted
// coordinator adopts the live agents it finds under <dir> (by agent.pid and their command line).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "coordinator/native/pool/pool_provider.h"

namespace gleaner::native {

struct LocalPoolOptions {
  std::string agent_bin;                // gleaner-agent (or a wrapper that execs it)
  std::string dir;                      // instances' state dirs
  std::string coordinator_url;          // what agents connect to
  std::string enroll_token;             // enroll (or operator) token for registration
  std::vector<std::string> extra_args;  // appended to every agent's command line
  double kill_after_s = 60;             // SIGTERM → SIGKILL
};

// Adopts live agents already under options.dir. Errors: the dir cannot be created.
Result<std::unique_ptr<PoolProvider>> MakeLocalPool(LocalPoolOptions options);

}  // namespace gleaner::native
