// End-to-end fixture for gleaner-agent tests: a real coordinator, real agents (each with its
// own state dir and machine id), synthetic jobs submitted over HTTP, and checks of the results
// against the hash chain computed here.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tests/integration/coordinator_fixture.h"
#include "tests/integration/harness.h"

namespace gleaner::testing {

// Lowercase hex of s_steps for the synthetic kind, computed independently of gleaner-train.
std::string ExpectedChain(int64_t seed, int64_t steps);

class AgentProcess {
 public:
  AgentProcess(const std::string& dir, const std::string& name, const std::string& coordinator,
               const std::string& enroll_token,
               std::vector<std::pair<std::string, std::string>> env = {},
               std::vector<std::string> extra_args = {});
  bool Start(std::string* error);
  // node_id from the state dir once registered ("" before).
  std::string NodeId() const;
  std::string Log() const { return process_->Stderr(); }
  Process& process() { return *process_; }
  const std::string& name() const { return name_; }

 private:
  std::string state_dir_, name_;
  std::unique_ptr<Process> process_;
};

class Fleet {
 public:
  // Starts a coordinator with fast intervals; keys for a developer and for enrolment. With `tls`
  // the coordinator serves HTTPS and agents get --ca-file tls.ca_file.
  explicit Fleet(const std::string& dir, double heartbeat_s = 0.2,
                 std::vector<std::string> coordinator_args = {},
                 std::vector<std::pair<std::string, std::string>> coordinator_env = {},
                 CoordinatorTls tls = {});
  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }

  CoordinatorProcess& coordinator() { return *coord_; }
  // Kills the coordinator and starts it again on the same port with the same database (and
  // extra_args added to its command line).
  bool RestartCoordinator(std::string* error, const std::vector<std::string>& extra_args = {});
  const std::string& developer_token() const { return developer_; }
  const std::string& enroll_token() const { return enroll_; }

  AgentProcess& AddAgent(const std::string& name,
                         std::vector<std::pair<std::string, std::string>> env = {},
                         std::vector<std::string> extra_args = {});
  // POST /v1/jobs; returns the job id ("" on failure).
  std::string Submit(const Json& params, int max_failures = 0);
  Json Job(const std::string& id);
  Json Events(const std::string& id);
  // Content of the job's chain.txt via GET /v1/jobs/{id}/result.
  std::string ResultChain(const std::string& id);
  // True once every job is in a final state (completed/failed/canceled), up to timeout.
  bool WaitAllFinal(const std::vector<std::string>& ids, Millis timeout);
  // True once the job's latest committed checkpoint is at min_step or later, up to timeout.
  bool WaitCheckpoint(const std::string& id, int64_t min_step, Millis timeout);
  // Running job held by node (""), or "" when none.
  std::string RunningJobOf(const std::string& node_id, int64_t min_step, int64_t max_step);

 private:
  std::string dir_, error_, developer_, enroll_;
  std::unique_ptr<CoordinatorProcess> coord_;
  std::vector<std::unique_ptr<AgentProcess>> agents_;
  std::vector<std::string> coordinator_args_;
  double heartbeat_s_;
  int restarts_ = 0;
};

}  // namespace gleaner::testing
