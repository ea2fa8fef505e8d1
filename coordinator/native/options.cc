#include "coordinator/native/options.h"

#include <arpa/inet.h>

#include <algorithm>
#include <set>

namespace gleaner::native {

namespace {

using core::SettingKind;
using core::SettingValue;

// A setting of this shell only (the core's are core::CoreSettings()). Parsed like the core's
// (core::ParseSettingValue), then applied by `set`.
struct Spec {
  const char* name;
  SettingKind kind;
  double min, max;   // kSeconds, kInt: inclusive range
  const char* help;  // with the default in parentheses
  Status (*set)(ServeOptions* o, const SettingValue& v);
};

Status SetListen(ServeOptions* o, const SettingValue& value) {
  const std::string& v = value.text;
  size_t colon = v.rfind(':');
  if (colon == std::string::npos || colon + 1 == v.size()) {
    return Status::Invalid("expected HOST:PORT, got '" + v + "'");
  }
  std::string host = v.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host.empty()) host = "0.0.0.0";
  Result<SettingValue> port =
      core::ParseSettingValue(SettingKind::kInt, v.substr(colon + 1), 0, 65535);
  if (!port.ok()) return Status::Invalid("port " + port.status().message());
  o->listen_host = host;
  o->listen_port = int(port->integer);
  return Status::Ok();
}

#define STR(field)                             \
  [](ServeOptions* o, const SettingValue& v) { \
    o->field = v.text;                         \
    return Status::Ok();                       \
  }
#define SECS(field)                            \
  [](ServeOptions* o, const SettingValue& v) { \
    o->field = v.seconds;                      \
    return Status::Ok();                       \
  }
#define INT(field, type)                       \
  [](ServeOptions* o, const SettingValue& v) { \
    o->field = type(v.integer);                \
    return Status::Ok();                       \
  }
#define BOOL(field)                            \
  [](ServeOptions* o, const SettingValue& v) { \
    o->field = v.flag;                         \
    return Status::Ok();                       \
  }

using K = SettingKind;
constexpr double kDay = 86400;

const std::vector<Spec>& Specs() {
  static const std::vector<Spec> specs = {
      {"db", K::kString, 0, 0, "SQLite database file (created if missing) [required]", STR(db)},
      {"listen", K::kString, 0, 0,
       "HOST:PORT to listen on; port 0 picks a free port (127.0.0.1:8080)", SetListen},
      {"data-dir", K::kString, 0, 0, "directory for blobs/ and signing.key [required]",
       STR(data_dir)},
      {"config", K::kString, 0, 0, "config file of `name = value` lines", nullptr},
      {"port-file", K::kString, 0, 0, "write the bound port here (atomically) once listening",
       STR(port_file)},
      {"maintenance-period", K::kSeconds, 0.001, kDay, "seconds between maintenance ticks (60)",
       SECS(maintenance_period_s)},
      {"threads", K::kInt, 1, 4096,
       "blob transfer threads; each running upload or download holds one (64)", INT(threads, int)},
      {"db-readers", K::kInt, 1, 256, "database connections answering read-only queries (4)",
       INT(db_readers, int)},
      {"max-connections", K::kInt, 1, 1000000,
       "open client connections at most; more are accepted and closed at once (10000)",
       INT(max_connections, int)},
      {"header-timeout", K::kSeconds, 0.1, 3600,
       "a request head must arrive whole this long after its first byte, else 408, seconds (10)",
       SECS(header_timeout_s)},
      {"keep-alive-timeout", K::kSeconds, 0.001, 3600,
       "idle keep-alive connection timeout, seconds (5)", SECS(keep_alive_timeout_s)},
      {"io-timeout", K::kSeconds, 0.1, 3600,
       "a socket read or write that makes no progress this long fails, seconds (30)",
       SECS(io_timeout_s)},
      {"log-level", K::kString, 0, 0, "debug, info, warn or error (info)", STR(log_level)},
      {"tls-cert", K::kString, 0, 0,
       "PEM certificate (then intermediates): serve HTTPS; re-read on SIGHUP", STR(tls_cert)},
      {"tls-key", K::kString, 0, 0, "PEM private key for --tls-cert; re-read on SIGHUP",
       STR(tls_key)},
      {"insecure-http", K::kBool, 0, 0,
       "allow plain HTTP on a non-loopback address (behind a TLS-terminating proxy) (false)",
       BOOL(insecure_http)},
      {"group-commit", K::kBool, 0, 0,
       "concurrent writes share one durable COMMIT (true); false: one commit per request",
       BOOL(group_commit)},
      // The autoscaler's pool provider (pool_options.h).
      {"pool-provider", K::kString, 0, 0,
       "where the autoscaler's target is applied: none, local, salad, kubernetes (none)",
       STR(pool.provider)},
      {"pool-agent-bin", K::kString, 0, 0, "local: the gleaner-agent binary (beside this one)",
       STR(pool.local.agent_bin)},
      {"pool-dir", K::kString, 0, 0, "local: agents' state dirs (<data-dir>/pool)",
       STR(pool.local.dir)},
      {"pool-agent-args", K::kString, 0, 0, "local: extra agent arguments, space-separated",
       [](ServeOptions* o, const SettingValue& v) {
         const std::string& s = v.text;
         o->pool.local.extra_args.clear();
         size_t pos = 0;
         while (pos < s.size()) {
           size_t end = s.find(' ', pos);
           if (end == std::string::npos) end = s.size();
           if (end > pos) o->pool.local.extra_args.push_back(s.substr(pos, end - pos));
           pos = end + 1;
         }
         return Status::Ok();
       }},
      {"salad-api-url", K::kString, 0, 0, "salad: API base (https://api.salad.com/api/public)",
       STR(pool.salad.api_url)},
      {"salad-organization", K::kString, 0, 0, "salad: organization name",
       STR(pool.salad.organization)},
      {"salad-project", K::kString, 0, 0, "salad: project name", STR(pool.salad.project)},
      {"salad-container-group", K::kString, 0, 0, "salad: container group of agents",
       STR(pool.salad.group)},
      {"k8s-api-url", K::kString, 0, 0, "kubernetes: API server (https://kubernetes.default.svc)",
       STR(pool.kubernetes.api_url)},
      {"k8s-namespace", K::kString, 0, 0, "kubernetes: namespace (default)",
       STR(pool.kubernetes.ns)},
      {"k8s-deployment", K::kString, 0, 0, "kubernetes: Deployment of agents",
       STR(pool.kubernetes.deployment)},
      {"k8s-label-selector", K::kString, 0, 0, "kubernetes: label selector of the agents' pods",
       STR(pool.kubernetes.label_selector)},
      {"k8s-token-file", K::kString, 0, 0, "kubernetes: bearer token file (service account's)",
       STR(pool.kubernetes.token_file)},
      {"k8s-ca-file", K::kString, 0, 0, "kubernetes: CA bundle for the API server (system's)",
       STR(pool.kubernetes.ca_file)},
  };
  return specs;
}

#undef STR
#undef SECS
#undef INT
#undef BOOL

// A setting of either table: this shell's (spec) or the core's (core).
struct Named {
  const Spec* spec = nullptr;
  const core::Setting* core = nullptr;
  SettingKind kind() const { return spec ? spec->kind : core->kind; }
  const char* name() const { return spec ? spec->name : core->name; }
};

Named Find(const std::string& name) {
  for (const Spec& s : Specs()) {
    if (name == s.name) return {&s, nullptr};
  }
  return {nullptr, core::FindCoreSetting(name)};
}

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

// Parses and applies one value; `origin` names where it came from for the error line.
Status Apply(ServeOptions* o, const Named& n, const std::string& value, const std::string& origin) {
  if (n.core) return core::ApplyCoreSetting(&o->core, *n.core, value, origin);
  Result<SettingValue> v = core::ParseSettingValue(n.spec->kind, value, n.spec->min, n.spec->max);
  if (!v.ok()) return Status::Invalid(origin + ": " + v.status().message());
  Status st = n.spec->set(o, *v);
  return st.ok() ? st : Status::Invalid(origin + ": " + st.message());
}

}  // namespace

Result<ServeOptions> ParseServeOptions(const std::vector<std::string>& args, const EnvLookup& env,
                                       const FileReader& read_file) {
  // 1. Collect flags (name → value), rejecting unknown ones.
  std::vector<std::pair<Named, std::string>> flags;
  std::string config_path;
  for (size_t k = 0; k < args.size(); ++k) {
    const std::string& a = args[k];
    if (a.rfind("--", 0) != 0) return Status::Invalid("unexpected argument '" + a + "'");
    std::string name = a.substr(2), value;
    bool has_value = false;
    size_t eq = name.find('=');
    if (eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    Named setting = Find(name);
    if (!setting.spec && !setting.core) {
      return Status::Invalid("unknown flag --" + name + " (see --help)");
    }
    if (!has_value) {
      bool next_is_value = k + 1 < args.size() && args[k + 1].rfind("--", 0) != 0;
      if (setting.kind() == SettingKind::kBool && !next_is_value) {
        value = "true";
      } else if (k + 1 >= args.size()) {
        return Status::Invalid("--" + name + " needs a value");
      } else {
        value = args[++k];
      }
    }
    if (name == "config") {
      config_path = value;
    } else {
      flags.emplace_back(setting, value);
    }
  }
  if (config_path.empty()) {
    if (const char* c = env("GLEANER_CONFIG")) config_path = c;
  }

  ServeOptions o;
  std::set<std::string> seen;
  // 2. Config file (lowest precedence after defaults).
  if (!config_path.empty()) {
    auto text = read_file(config_path);
    if (!text.ok()) {
      return Status::Invalid("cannot read config file " + config_path + ": " +
                             text.status().message());
    }
    int line_no = 0;
    size_t pos = 0;
    const std::string& t = *text;
    while (pos < t.size()) {
      size_t nl = t.find('\n', pos);
      if (nl == std::string::npos) nl = t.size();
      std::string line = t.substr(pos, nl - pos);
      pos = nl + 1;
      ++line_no;
      size_t hash = line.find('#');
      if (hash != std::string::npos) line = line.substr(0, hash);
      line = Trim(line);
      if (line.empty()) continue;
      std::string origin = config_path + ":" + std::to_string(line_no);
      size_t eq = line.find('=');
      if (eq == std::string::npos) return Status::Invalid(origin + ": expected `name = value`");
      std::string name = Trim(line.substr(0, eq));
      Named setting = Find(name);
      if ((!setting.spec && !setting.core) || name == "config") {
        return Status::Invalid(origin + ": unknown setting '" + name + "'");
      }
      GLEANER_RETURN_IF_ERROR(Apply(&o, setting, Trim(line.substr(eq + 1)), origin + " " + name));
      seen.insert(name);
    }
  }
  // 3. Environment.
  std::vector<Named> all;
  for (const Spec& spec : Specs()) {
    if (std::string(spec.name) != "config") all.push_back({&spec, nullptr});
  }
  for (const core::Setting& setting : core::CoreSettings()) all.push_back({nullptr, &setting});
  for (const Named& setting : all) {
    std::string var = core::SettingEnvName(setting.name());
    if (const char* v = env(var)) {
      GLEANER_RETURN_IF_ERROR(Apply(&o, setting, v, var));
      seen.insert(setting.name());
    }
  }
  // 4. Flags win.
  for (const auto& [setting, value] : flags) {
    GLEANER_RETURN_IF_ERROR(Apply(&o, setting, value, std::string("--") + setting.name()));
    seen.insert(setting.name());
  }
  // Credentials never come from flags (they would show in `ps`).
  if (const char* v = env("AWS_ACCESS_KEY_ID")) o.core.s3.access_key_id = v;
  if (const char* v = env("AWS_SECRET_ACCESS_KEY")) o.core.s3.secret_access_key = v;

  if (const char* v = env("SALAD_API_KEY")) o.pool.salad.api_key = v;
  // Without it, the local pool's agents get an enroll key of their own (main.cc), never the
  // operator token.
  if (const char* v = env("GLEANER_POOL_ENROLL_TOKEN")) o.pool.local.enroll_token = v;
  GLEANER_RETURN_IF_ERROR(o.pool.Validate());
  core::DeriveCoreDefaults(&o.core, seen);
  o.public_url_set = seen.count("public-url") > 0;
  if (o.db.empty()) return Status::Invalid("--db is required (or GLEANER_DB)");
  if (o.data_dir.empty()) return Status::Invalid("--data-dir is required (or GLEANER_DATA_DIR)");
  if (o.log_level != "debug" && o.log_level != "info" && o.log_level != "warn" &&
      o.log_level != "error") {
    return Status::Invalid("--log-level must be debug, info, warn or error");
  }
  if (o.tls_cert.empty() != o.tls_key.empty()) {
    return Status::Invalid("--tls-cert and --tls-key go together");
  }
  if (o.tls_cert.empty() && !o.insecure_http && !IsLoopbackHost(o.listen_host)) {
    return Status::Invalid("--listen " + o.listen_host +
                           " is not a loopback address: give --tls-cert and --tls-key, or "
                           "--insecure-http when a TLS-terminating proxy is in front");
  }
  if (!o.public_url_set) {
    o.core.public_url = std::string(o.tls_cert.empty() ? "http" : "https") + "://" + o.listen_host +
                        ":" + std::to_string(o.listen_port);
  }
  return o;
}

bool IsLoopbackHost(const std::string& host) {
  if (host == "localhost") return true;
  unsigned char addr[16];
  if (inet_pton(AF_INET, host.c_str(), addr) == 1) return addr[0] == 127;
  if (inet_pton(AF_INET6, host.c_str(), addr) != 1) return false;
  static const unsigned char kLoopback6[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  static const unsigned char kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (std::equal(addr, addr + 16, kLoopback6)) return true;
  return std::equal(addr, addr + 12, kMapped) && addr[12] == 127;
}

std::string ServeUsage() {
  std::string out =
      "usage: gleaner-coordinator serve --db FILE --data-dir DIR [--listen HOST:PORT] [options]\n"
      "Every option is also GLEANER_<NAME> in the environment and `name = value` in --config.\n"
      "S3 credentials: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY. Blob signing key: "
      "GLEANER_SIGNING_KEY or <data-dir>/signing.key.\n"
      "Operator bootstrap: GLEANER_OPERATOR_TOKEN. Pool secrets: SALAD_API_KEY, "
      "GLEANER_POOL_ENROLL_TOKEN.\n\noptions:\n";
  auto line = [&](const char* name, SettingKind kind, const std::string& help) {
    std::string flag = std::string("  --") + name;
    if (kind != SettingKind::kBool) {
      flag += kind == SettingKind::kSeconds ? " S" : kind == SettingKind::kInt ? " N" : " V";
    }
    if (flag.size() < 28) flag.resize(28, ' ');
    out += flag + " " + help + "\n";
  };
  for (const Spec& s : Specs()) line(s.name, s.kind, s.help);
  for (const core::Setting& s : core::CoreSettings()) {
    line(s.name, s.kind, std::string(s.doc) + " (" + core::SettingDefault(s) + ")");
  }
  return out;
}

}  // namespace gleaner::native
