#include "tests/integration/agent_fleet.h"

#include <algorithm>

#include "shared/sha256.h"

namespace gleaner::testing {

std::string ExpectedChain(int64_t seed, int64_t steps) {
  Digest s = Sha256Of(std::to_string(seed));
  for (int64_t k = 1; k <= steps; ++k) {
    uint8_t buf[40];
    std::copy(s.begin(), s.end(), buf);
    for (int i = 0; i < 8; ++i) buf[32 + i] = uint8_t(uint64_t(k) >> (8 * i));
    s = Sha256Of(std::string_view(reinterpret_cast<const char*>(buf), sizeof buf));
  }
  return HexEncode(s);
}

AgentProcess::AgentProcess(const std::string& dir, const std::string& name,
                           const std::string& coordinator, const std::string& enroll_token,
                           std::vector<std::pair<std::string, std::string>> env,
                           std::vector<std::string> extra_args)
    : state_dir_(dir + "/" + name), name_(name) {
  ProcessSpec spec;
  spec.binary = "gleaner-agent";
  spec.args = {"--coordinator",       coordinator, "--enroll-token",      enroll_token,
               "--state-dir",         state_dir_,  "--max-poll-interval", "0.1",
               "--shutdown-deadline", "10"};
  spec.args.insert(spec.args.end(), extra_args.begin(), extra_args.end());
  spec.env = std::move(env);
  spec.env.emplace_back("GLEANER_MACHINE_ID", "machine-" + name);
  spec.unset_env = {"SALAD_MACHINE_ID", "GLEANER_COORDINATOR", "GLEANER_STATE_DIR",
                    "GLEANER_ENROLL_TOKEN"};
  spec.stderr_path = dir + "/" + name + ".log";
  process_ = std::make_unique<Process>(std::move(spec));
}

bool AgentProcess::Start(std::string* error) {
  return process_->Start(error);
}

std::string AgentProcess::NodeId() const {
  Json j = Json::parse(ReadFile(state_dir_ + "/identity.json", "{}"), nullptr, false);
  if (!j.is_object() || !j.contains("node_id") || !j["node_id"].is_string()) return "";
  return j["node_id"].get<std::string>();
}

Fleet::Fleet(const std::string& dir, double heartbeat_s, std::vector<std::string> coord_args,
             std::vector<std::pair<std::string, std::string>> coord_env, CoordinatorTls tls)
    : dir_(dir), coordinator_args_(std::move(coord_args)), heartbeat_s_(heartbeat_s) {
  CoordinatorOptions o;
  o.tls = std::move(tls);
  o.env = std::move(coord_env);
  o.heartbeat_interval_s = heartbeat_s;
  // Fast heartbeats, but a stall window that a loaded 2-core machine does not trip by accident
  // (2 x 0.2 s lost live leases to late heartbeats under CI load); tests that need another
  // window pass --stall-after themselves.
  bool own_stall = false;
  for (const std::string& a : coordinator_args_) own_stall = own_stall || a == "--stall-after";
  if (!own_stall) o.stall_after_s = std::max(2 * heartbeat_s, 1.5);
  o.maintenance_period_s = 0.2;
  o.extra_args = coordinator_args_;
  o.extra_args.insert(o.extra_args.end(), {"--retry-after", "0.1"});
  coord_ = std::make_unique<CoordinatorProcess>(dir, o);
  if (!coord_->Start(&error_)) return;
  HttpClient op = coord_->OperatorClient();
  HttpResult d = op.Post("/v1/keys", Json{{"role", "developer"}, {"name", "dev"}});
  HttpResult e = op.Post("/v1/keys", Json{{"role", "enroll"}, {"name", "enroll"}});
  if (d.status != 201 || e.status != 201) {
    error_ = "keys: " + d.Describe() + " / " + e.Describe();
    return;
  }
  developer_ = d.json()["token"].get<std::string>();
  enroll_ = e.json()["token"].get<std::string>();
}

bool Fleet::RestartCoordinator(std::string* error, const std::vector<std::string>& extra_args) {
  int port = coord_->port();
  coord_->process().Kill();
  CoordinatorOptions o = coord_->options();
  o.name = "coordinator-r" + std::to_string(++restarts_);
  o.extra_args.insert(o.extra_args.end(), {"--listen", "127.0.0.1:" + std::to_string(port)});
  o.extra_args.insert(o.extra_args.end(), extra_args.begin(), extra_args.end());
  coord_ = std::make_unique<CoordinatorProcess>(dir_, o);
  return coord_->Start(error);
}

AgentProcess& Fleet::AddAgent(const std::string& name,
                              std::vector<std::pair<std::string, std::string>> env,
                              std::vector<std::string> extra_args) {
  const std::string& ca = coord_->options().tls.ca_file;
  if (!ca.empty()) {
    extra_args.push_back("--ca-file");
    extra_args.push_back(ca);
  }
  agents_.push_back(std::make_unique<AgentProcess>(dir_, name, coord_->url(), enroll_,
                                                   std::move(env), std::move(extra_args)));
  return *agents_.back();
}

std::string Fleet::Submit(const Json& params, int max_failures) {
  Json body = {{"kind", "synthetic"}, {"params", params}};
  if (max_failures > 0) body["max_failures"] = max_failures;
  HttpResult r = coord_->Client(developer_).Post("/v1/jobs", body);
  if (r.status != 201) return "";
  return r.json()["id"].get<std::string>();
}

Json Fleet::Job(const std::string& id) {
  return coord_->Client(developer_).Get("/v1/jobs/" + id).json();
}

Json Fleet::Events(const std::string& id) {
  return coord_->Client(developer_).Get("/v1/jobs/" + id + "/events").json();
}

std::string Fleet::ResultChain(const std::string& id) {
  HttpResult r = coord_->Client(developer_).Get("/v1/jobs/" + id + "/result");
  Json j = r.json();
  if (r.status != 200 || !j.contains("outputs")) return "<no result: " + r.Describe() + ">";
  for (const Json& o : j["outputs"]) {
    if (o.value("name", "") == "chain.txt") {
      return HttpClient::Fetch("GET", o["url"].get<std::string>(), "", "", {},
                               coord_->options().tls.ca_file)
          .body;
    }
  }
  return "<no chain.txt>";
}

bool Fleet::WaitAllFinal(const std::vector<std::string>& ids, Millis timeout) {
  return WaitUntil(
      [&] {
        for (const std::string& id : ids) {
          std::string s = Job(id).value("state", "");
          if (s != "completed" && s != "failed" && s != "canceled") return false;
        }
        return true;
      },
      timeout, Millis(100));
}

bool Fleet::WaitCheckpoint(const std::string& id, int64_t min_step, Millis timeout) {
  return WaitUntil(
      [&] {
        Json j = Job(id);
        return j.contains("latest_checkpoint") && j["latest_checkpoint"].is_object() &&
               j["latest_checkpoint"].value("step", int64_t(0)) >= min_step;
      },
      timeout, Millis(20));
}

std::string Fleet::RunningJobOf(const std::string& node_id, int64_t min_step, int64_t max_step) {
  Json list = coord_->OperatorClient().Get("/v1/jobs?state=running&limit=100").json();
  if (!list.contains("jobs")) return "";
  for (const Json& j : list["jobs"]) {
    if (j.value("node_id", "") == node_id && j.value("step", 0) >= min_step &&
        j.value("step", 0) <= max_step) {
      return j["id"].get<std::string>();
    }
  }
  return "";
}

}  // namespace gleaner::testing
