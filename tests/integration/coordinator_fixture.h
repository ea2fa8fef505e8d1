// CoordinatorProcess: a real gleaner-coordinator for black-box tests (built on harness.h).
//
// Runs `gleaner-coordinator serve` on 127.0.0.1 port 0 with a database and data dir inside a
// directory the test owns, an operator token (GLEANER_OPERATOR_TOKEN), fast test intervals unless
// overridden, stderr captured to <dir>/<name>.stderr. Start() waits for the port file.
// Several CoordinatorProcess objects may share one database (same dir) to test multi-process
// behaviour; Restart() keeps the database and data dir.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tests/integration/harness.h"

namespace gleaner::testing {

// HTTPS for a test coordinator: its PEM certificate and key, and the CA file clients trust.
struct CoordinatorTls {
  std::string cert, key, ca_file;
  bool enabled() const { return !cert.empty(); }
};

struct CoordinatorOptions {
  std::string name = "coordinator";  // stderr and port file names
  std::string db;                    // default <dir>/db.sqlite
  std::string data_dir;              // default <dir>/data
  std::string operator_token = "op_test_token_0123456789abcdef";
  double heartbeat_interval_s = 1;
  double stall_after_s = 0;  // 0: coordinator default (2 x interval)
  double maintenance_period_s = 0.2;
  std::vector<std::string> extra_args;
  std::vector<std::pair<std::string, std::string>> env;
  CoordinatorTls tls;  // set: serve HTTPS (url() is https://, clients trust tls.ca_file)
};

class CoordinatorProcess {
 public:
  CoordinatorProcess(std::string dir, CoordinatorOptions options = {});

  // Starts and waits (up to timeout) for the port. False + *error (with the stderr tail) on
  // failure.
  bool Start(std::string* error, Millis timeout = Millis(10000));
  // SIGKILL (no cleanup), then Start() again on a new port.
  bool Restart(std::string* error);

  int port() const { return port_; }
  std::string url() const {
    return (options_.tls.enabled() ? "https://127.0.0.1:" : "http://127.0.0.1:") +
           std::to_string(port_);
  }
  const CoordinatorOptions& options() const { return options_; }
  // A client for this coordinator with the given token ("" = none).
  HttpClient Client(const std::string& token = "") const;
  HttpClient OperatorClient() const { return Client(options_.operator_token); }
  Process& process() { return *process_; }
  std::string StderrPath() const;

 private:
  std::string dir_;
  CoordinatorOptions options_;
  std::unique_ptr<Process> process_;
  int port_ = 0;
};

// ---- API shortcuts for tests (each returns nullopt and fills *error on an unexpected answer) ----

// POST /v1/keys as operator → the new key's token.
std::optional<std::string> CreateKey(const CoordinatorProcess& coord, const std::string& role,
                                     std::string* error);

struct NodeCredentials {
  std::string id;
  std::string token;
};
// POST /v1/nodes/register with an enroll token, as a node with that GPU ("cpu": none).
std::optional<NodeCredentials> RegisterNode(const CoordinatorProcess& coord,
                                            const std::string& enroll_token,
                                            const std::string& machine_id, int64_t vram_mb,
                                            std::string* error,
                                            const std::string& gpu_name = "RTX 4090");

// GET /v1/nodes as operator → each node's state by node id (empty when the call fails).
std::map<std::string, std::string> NodeStates(const CoordinatorProcess& coord);

// POST /v1/jobs {kind: synthetic, params} as a developer → job id.
std::optional<std::string> SubmitSyntheticJob(HttpClient& developer, int64_t steps,
                                              int64_t checkpoint_every, std::string* error,
                                              const Json& extra = Json::object());

}  // namespace gleaner::testing
