#include "tests/integration/coordinator_fixture.h"

#include <algorithm>
#include <sstream>

namespace gleaner::testing {

namespace {
std::string Seconds(double s) {
  std::ostringstream out;
  out << s;
  return out.str();
}
std::string Tail(const std::string& text, size_t n = 2000) {
  return text.size() <= n ? text : text.substr(text.size() - n);
}
}  // namespace

CoordinatorProcess::CoordinatorProcess(std::string dir, CoordinatorOptions options)
    : dir_(std::move(dir)), options_(std::move(options)) {
  if (options_.db.empty()) options_.db = dir_ + "/db.sqlite";
  if (options_.data_dir.empty()) options_.data_dir = dir_ + "/data";
  ProcessSpec spec;
  spec.binary = "gleaner-coordinator";
  spec.args = {"serve", "--db", options_.db, "--data-dir", options_.data_dir, "--listen",
               "127.0.0.1:0", "--port-file", dir_ + "/" + options_.name + ".port",
               "--heartbeat-interval", Seconds(options_.heartbeat_interval_s),
               "--maintenance-period", Seconds(options_.maintenance_period_s),
               // Short, so tests that count connections see idle ones go quickly.
               "--keep-alive-timeout", "1"};
  if (options_.stall_after_s > 0) {
    spec.args.push_back("--stall-after");
    spec.args.push_back(Seconds(options_.stall_after_s));
  }
  if (options_.tls.enabled()) {
    spec.args.insert(spec.args.end(),
                     {"--tls-cert", options_.tls.cert, "--tls-key", options_.tls.key});
  }
  spec.args.insert(spec.args.end(), options_.extra_args.begin(), options_.extra_args.end());
  spec.env = options_.env;
  // Test clients poll, and test agents heartbeat, far faster than production ones, and some
  // tests submit thousands of jobs: no rate or active-job limits unless the test asks (its
  // flags, or its own values of these variables, win).
  const std::pair<const char*, const char*> unlimited[] = {
      {"GLEANER_DEVELOPER_RATE_LIMIT", "off"},
      {"GLEANER_NODE_RATE_LIMIT", "off"},
      {"GLEANER_OPERATOR_RATE_LIMIT", "off"},
      {"GLEANER_ENROLL_RATE_LIMIT", "off"},
      {"GLEANER_ENROLL_ADDRESS_RATE_LIMIT", "off"},
      {"GLEANER_ENROLL_MAX_NODES", "0"},
      {"GLEANER_MAX_ACTIVE_JOBS", "0"}};
  for (const auto& [var, value] : unlimited) {
    bool set = false;
    for (const auto& kv : options_.env) set = set || kv.first == var;
    if (!set) spec.env.emplace_back(var, value);
  }
  if (!options_.operator_token.empty()) {
    spec.env.emplace_back("GLEANER_OPERATOR_TOKEN", options_.operator_token);
  }
  // The test's own environment must not configure the coordinator behind its back.
  spec.unset_env = {"GLEANER_CONFIG", "GLEANER_DB", "GLEANER_LISTEN", "GLEANER_SIGNING_KEY"};
  spec.stderr_path = StderrPath();
  process_ = std::make_unique<Process>(std::move(spec));
}

std::string CoordinatorProcess::StderrPath() const {
  return dir_ + "/" + options_.name + ".stderr";
}

bool CoordinatorProcess::Start(std::string* error, Millis timeout) {
  std::string port_file = dir_ + "/" + options_.name + ".port";
  RemoveAll(port_file);
  if (!process_->Start(error)) return false;
  auto port = WaitForPortFile(port_file, process_.get(), timeout);
  if (!port) {
    auto st = process_->exit_status();
    *error = "coordinator did not report a port (" + (st ? st->ToString() : "timeout") +
             "); stderr: " + Tail(process_->Stderr());
    return false;
  }
  port_ = *port;
  // The "listening" log line follows the port file; tests may read it at once (unless a
  // --log-level hides info lines).
  bool quiet = std::find(options_.extra_args.begin(), options_.extra_args.end(), "--log-level") !=
               options_.extra_args.end();
  if (!quiet && !WaitUntil(
                    [&] {
                      return process_->Stderr().find("\"msg\":\"listening\"") !=
                                 std::string::npos ||
                             !process_->Running();
                    },
                    timeout)) {
    *error = "coordinator did not log \"listening\"; stderr: " + Tail(process_->Stderr());
    return false;
  }
  if (!process_->Running()) {
    *error = "coordinator exited after binding; stderr: " + Tail(process_->Stderr());
    return false;
  }
  return true;
}

bool CoordinatorProcess::Restart(std::string* error) {
  process_->Kill();
  return Start(error);
}

HttpClient CoordinatorProcess::Client(const std::string& token) const {
  HttpClient c(url());
  c.set_token(token);
  if (!options_.tls.ca_file.empty()) c.set_ca_file(options_.tls.ca_file);
  return c;
}

std::optional<std::string> CreateKey(const CoordinatorProcess& coord, const std::string& role,
                                     std::string* error) {
  HttpClient op = coord.OperatorClient();
  HttpResult r = op.Post("/v1/keys", {{"role", role}, {"name", "test-" + role}});
  Json j = r.json();
  if (r.status != 201 || !j.contains("token") || !j["token"].is_string()) {
    *error = "POST /v1/keys: " + r.Describe();
    return std::nullopt;
  }
  return j["token"].get<std::string>();
}

std::optional<NodeCredentials> RegisterNode(const CoordinatorProcess& coord,
                                            const std::string& enroll_token,
                                            const std::string& machine_id, int64_t vram_mb,
                                            std::string* error, const std::string& gpu_name) {
  HttpClient c = coord.Client(enroll_token);
  HttpResult r = c.Post("/v1/nodes/register", {{"machine_id", machine_id},
                                               {"gpu", {{"name", gpu_name}, {"vram_mb", vram_mb}}},
                                               {"agent_version", "0.1.0"}});
  Json j = r.json();
  if (r.status != 200 || !j.contains("node_id") || !j.contains("token")) {
    *error = "POST /v1/nodes/register: " + r.Describe();
    return std::nullopt;
  }
  return NodeCredentials{j["node_id"].get<std::string>(), j["token"].get<std::string>()};
}

std::map<std::string, std::string> NodeStates(const CoordinatorProcess& coord) {
  HttpResult r = coord.OperatorClient().Get("/v1/nodes?limit=100");
  std::map<std::string, std::string> out;
  if (r.status != 200) return out;
  const Json body = r.json();
  for (const Json& n : body["nodes"]) out[n["id"]] = n["state"];
  return out;
}

std::optional<std::string> SubmitSyntheticJob(HttpClient& developer, int64_t steps,
                                              int64_t checkpoint_every, std::string* error,
                                              const Json& extra) {
  Json body = {{"kind", "synthetic"},
               {"params", {{"steps", steps}, {"checkpoint_every", checkpoint_every}}}};
  for (auto it = extra.begin(); it != extra.end(); ++it) body[it.key()] = it.value();
  HttpResult r = developer.Post("/v1/jobs", body);
  Json j = r.json();
  if (r.status != 201 || !j.contains("id")) {
    *error = "POST /v1/jobs: " + r.Describe();
    return std::nullopt;
  }
  return j["id"].get<std::string>();
}

}  // namespace gleaner::testing
