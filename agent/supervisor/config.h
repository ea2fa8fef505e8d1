// gleaner-agent settings: flags > environment > config file (KEY=VALUE lines, keys as the long
// flag names without "--", e.g. "coordinator=http://..."; '#' starts a comment).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "agent/supervisor/owner_policy.h"
#include "shared/status.h"

namespace gleaner::agent {

struct AgentConfig {
  // Self-update (docs/agent.md "How updates are verified").
  std::string release_keys;                // --release-keys: pinned public keys, one per line
  std::string release_channel = "stable";  // --release-channel
  double update_interval_s = 3600;         // --update-interval: checks while idle
  bool self_test = false;                  // --self-test: check this binary, exit 0 if healthy
  std::string version;                     // this binary's version (set by main)

  std::string coordinator;          // --coordinator / GLEANER_COORDINATOR
  std::string enroll_token;         // --enroll-token / GLEANER_ENROLL_TOKEN
  std::string state_dir;            // --state-dir / GLEANER_STATE_DIR
  std::string machine_id;           // --machine-id / GLEANER_MACHINE_ID (else detected)
  std::string trainer;              // --trainer (default: gleaner-train beside gleaner-agent)
  std::string ca_file;              // --ca-file / GLEANER_CA_FILE: trust only these CAs (PEM)
  double heartbeat_override_s = 0;  // --heartbeat-interval: 0 = the lease's interval
  double shutdown_deadline_s = 20;  // --shutdown-deadline
  int64_t cache_max_mb = 20480;     // --cache-max-mb
  int keep_checkpoints = 3;         // --keep-checkpoints
  double idle_poll_max_s = 60;      // --max-poll-interval: cap on waits between work requests
  bool once = false;                // --once: exit after one job (tests, benchmarks)
  // --verify / verify=true: also take replays of other nodes' training segments (verification
  // leases, docs/agent.md "Replays") when no job fits. Off by default.
  bool verify = false;
  // --allow-private-fetch / allow-private-fetch=true: remote model files may come from loopback
  // and private addresses too (a mirror on the owner's LAN). Off: public addresses only.
  bool allow_private_fetch = false;
  OwnerControls owner;  // --gpus, --max-vram-mb, --work-hours, ... (owner_policy.h)
};

// The release version; a test build of gleaner-agent overrides it (GLEANER_AGENT_VERSION).
constexpr const char* kAgentVersion = "0.1.0";

// Parses argv (after the program name), the environment and an optional --config FILE.
// InvalidArgument with one readable line on bad input; NotFound("help") for --help.
Result<AgentConfig> ParseAgentConfig(int argc, char** argv);
const char* AgentUsage();
// The KEY=VALUE lines of a config file (InvalidArgument naming the line on a bad one).
Result<std::map<std::string, std::string>> ReadConfigFile(const std::string& path);

}  // namespace gleaner::agent
