#include "agent/supervisor/config.h"

#include <limits.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <vector>

#include "shared/native/files.h"
#include "shared/release_manifest.h"

namespace gleaner::agent {
namespace {

const char* const kEnv[][2] = {{"coordinator", "GLEANER_COORDINATOR"},
                               {"enroll-token", "GLEANER_ENROLL_TOKEN"},
                               {"state-dir", "GLEANER_STATE_DIR"},
                               {"machine-id", "GLEANER_MACHINE_ID"},
                               {"ca-file", "GLEANER_CA_FILE"}};

const char* const kKeys[] = {"coordinator",
                             "enroll-token",
                             "state-dir",
                             "machine-id",
                             "trainer",
                             "heartbeat-interval",
                             "shutdown-deadline",
                             "cache-max-mb",
                             "keep-checkpoints",
                             "max-poll-interval",
                             "config",
                             "ca-file",
                             "release-keys",
                             "release-channel",
                             "update-interval",
                             "verify",
                             "allow-private-fetch",
                             nullptr};

bool Known(const std::string& k) {
  for (const char* const* p = kKeys; *p != nullptr; ++p) {
    if (k == *p) return true;
  }
  for (const char* const* p = kOwnerConfigKeys; *p != nullptr; ++p) {
    if (k == *p) return true;
  }
  return false;
}

bool ParseNumber(const std::string& s, double lo, double hi, double* out) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || !(v >= lo && v <= hi)) return false;
  *out = v;
  return true;
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.pop_back();
  size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  return s.substr(i);
}

std::string DefaultTrainer() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "gleaner-train";
  buf[n] = '\0';
  return files::Join(files::Dirname(buf), "gleaner-train");
}

}  // namespace

const char* AgentUsage() {
  return "usage: gleaner-agent --coordinator URL --enroll-token TOKEN --state-dir DIR\n"
         "  [--config FILE] [--machine-id ID] [--trainer PATH] [--heartbeat-interval S]\n"
         "  [--shutdown-deadline S (20)] [--cache-max-mb N (20480)] [--keep-checkpoints N (3)]\n"
         "  [--release-keys FILE] [--release-channel NAME (stable)] [--update-interval S (3600)]\n"
         "  [--self-test (check this binary: reach the coordinator, run a tiny job; exit 0)]\n"
         "  [--max-poll-interval S (60)] [--ca-file PEM] [--once]\n"
         "  [--verify (also replay other nodes' training segments to check them)]\n"
         "  [--allow-private-fetch (remote model files may come from loopback/LAN addresses)]\n"
         "owner controls: [--gpus 0,1|GPU-UUID] [--max-vram-mb N]\n"
         "  [--work-hours 'Mon-Fri 22:00-07:00'] [--pause-programs a,b] [--max-gpu-temp C]\n"
         "  [--idle-minutes N] [--owner-check-interval S (5)]\n"
         "control: gleaner-agent status|pause|resume [--state-dir DIR] [--config FILE] [--json]\n"
         "HTTPS certificates are always verified: against the system CAs, or only the CAs in\n"
         "--ca-file.\n"
         "env: GLEANER_COORDINATOR, GLEANER_ENROLL_TOKEN, GLEANER_STATE_DIR, GLEANER_MACHINE_ID,\n"
         "     GLEANER_CA_FILE, SALAD_MACHINE_ID\n";
}

Result<std::map<std::string, std::string>> ReadConfigFile(const std::string& path) {
  std::map<std::string, std::string> values;
  Result<std::string> text = files::ReadAll(path, 1 << 20);
  if (!text.ok()) return Status::Invalid("config: " + text.status().message());
  size_t pos = 0;
  int line_no = 0;
  while (pos <= text->size()) {
    size_t nl = text->find('\n', pos);
    if (nl == std::string::npos) nl = text->size();
    std::string line = Trim(text->substr(pos, nl - pos));
    pos = nl + 1;
    ++line_no;
    if (line.empty() || line[0] == '#') continue;
    size_t eq = line.find('=');
    std::string key = eq == std::string::npos ? line : Trim(line.substr(0, eq));
    if (eq == std::string::npos || !Known(key) || key == "config") {
      return Status::Invalid("config line " + std::to_string(line_no) +
                             ": expected KEY=VALUE "
                             "with a known key");
    }
    values[key] = Trim(line.substr(eq + 1));
  }
  return values;
}

Result<AgentConfig> ParseAgentConfig(int argc, char** argv) {
  std::map<std::string, std::string> flags, values;
  bool once = false, self_test = false;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") return Status::NotFound("help");
    if (a == "--once") {
      once = true;
      continue;
    }
    if (a == "--self-test") {
      self_test = true;
      continue;
    }
    if (a == "--verify") {  // a switch; "--verify=false" (or verify=false in a file) turns it off
      flags["verify"] = "true";
      continue;
    }
    if (a == "--allow-private-fetch") {  // a switch, like --verify
      flags["allow-private-fetch"] = "true";
      continue;
    }
    if (a.rfind("--", 0) != 0) return Status::Invalid("unexpected argument '" + a + "'");
    std::string key = a.substr(2), value;
    size_t eq = key.find('=');
    if (eq != std::string::npos) {
      value = key.substr(eq + 1);
      key = key.substr(0, eq);
    } else {
      if (i + 1 >= argc) return Status::Invalid("--" + key + " needs a value");
      value = argv[++i];
    }
    if (!Known(key)) return Status::Invalid("unknown flag --" + key);
    flags[key] = value;
  }
  auto cfg = flags.find("config");
  if (cfg != flags.end()) {
    Result<std::map<std::string, std::string>> file = ReadConfigFile(cfg->second);
    if (!file.ok()) return file.status();
    values = *file;
  }
  for (const auto& e : kEnv) {
    const char* v = std::getenv(e[1]);
    if (v != nullptr && *v != '\0') values[e[0]] = v;
  }
  for (const auto& f : flags) values[f.first] = f.second;

  AgentConfig c;
  c.once = once;
  c.self_test = self_test;
  c.version = kAgentVersion;
  c.release_keys = values["release-keys"];
  if (values.count("release-channel")) c.release_channel = values["release-channel"];
  c.coordinator = values["coordinator"];
  c.enroll_token = values["enroll-token"];
  c.state_dir = values["state-dir"];
  c.machine_id = values["machine-id"];
  c.ca_file = values["ca-file"];
  c.trainer = values.count("trainer") ? values["trainer"] : DefaultTrainer();
  struct Num {
    const char* key;
    double lo, hi;
    double* out;
  };
  double cache_mb = double(c.cache_max_mb), keep = c.keep_checkpoints;
  std::vector<Num> nums = {{"heartbeat-interval", 0.01, 86400, &c.heartbeat_override_s},
                           {"shutdown-deadline", 0.1, 3600, &c.shutdown_deadline_s},
                           {"cache-max-mb", 0, 1e9, &cache_mb},
                           {"keep-checkpoints", 1, 1000, &keep},
                           {"max-poll-interval", 0.01, 86400, &c.idle_poll_max_s},
                           {"update-interval", 0.01, 1e7, &c.update_interval_s}};
  for (const Num& n : nums) {
    auto it = values.find(n.key);
    if (it == values.end()) continue;
    if (!ParseNumber(it->second, n.lo, n.hi, n.out)) {
      return Status::Invalid(std::string("--") + n.key + " must be a number in [" +
                             std::to_string(n.lo) + ", " + std::to_string(n.hi) + "]");
    }
  }
  auto verify = values.find("verify");
  if (verify != values.end()) {
    if (verify->second != "true" && verify->second != "false") {
      return Status::Invalid("verify must be true or false");
    }
    c.verify = verify->second == "true";
  }
  auto private_fetch = values.find("allow-private-fetch");
  if (private_fetch != values.end()) {
    if (private_fetch->second != "true" && private_fetch->second != "false") {
      return Status::Invalid("allow-private-fetch must be true or false");
    }
    c.allow_private_fetch = private_fetch->second == "true";
  }
  Status owner = ParseOwnerControls(values, &c.owner);
  if (!owner.ok()) return owner;
  c.cache_max_mb = int64_t(cache_mb);
  c.keep_checkpoints = int(keep);
  if (c.coordinator.empty()) return Status::Invalid("--coordinator URL is required");
  if (c.state_dir.empty()) return Status::Invalid("--state-dir DIR is required");
  if (c.coordinator.rfind("http://", 0) != 0 && c.coordinator.rfind("https://", 0) != 0) {
    return Status::Invalid("--coordinator must be an http:// or https:// URL");
  }
  if (!release::IsValidChannel(c.release_channel)) {
    return Status::Invalid("--release-channel must be [a-z0-9-], 1 to 32 characters");
  }
  if (!c.ca_file.empty()) {
    Result<std::string> pem = files::ReadAll(c.ca_file, 16 << 20);
    if (!pem.ok()) return Status::Invalid("--ca-file: " + pem.status().message());
    if (pem->find("-----BEGIN CERTIFICATE-----") == std::string::npos) {
      return Status::Invalid("--ca-file: no PEM certificate in " + c.ca_file);
    }
  }
  return c;
}

}  // namespace gleaner::agent
