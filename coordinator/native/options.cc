#include "coordinator/native/options.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <set>

namespace gleaner::native {

namespace {

enum class Kind { kString, kSeconds, kInt, kBool };

struct Spec {
  const char* name;
  Kind kind;
  const char* help;
  // Applies a parsed value. `s` is the raw text, `d`/`i`/`b` the parsed number or flag.
  std::function<Status(ServeOptions*, const std::string& s, double d, int64_t i, bool b)> set;
};

Status SetListen(ServeOptions* o, const std::string& v) {
  size_t colon = v.rfind(':');
  if (colon == std::string::npos || colon + 1 == v.size()) {
    return Status::Invalid("--listen: expected HOST:PORT, got '" + v + "'");
  }
  std::string host = v.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host.empty()) host = "0.0.0.0";
  std::string port = v.substr(colon + 1);
  char* end = nullptr;
  errno = 0;
  long p = std::strtol(port.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || p < 0 || p > 65535) {
    return Status::Invalid("--listen: port must be in [0, 65535], got '" + port + "'");
  }
  o->listen_host = host;
  o->listen_port = int(p);
  return Status::Ok();
}

#define STR(field)                                                   \
  [](ServeOptions* o, const std::string& s, double, int64_t, bool) { \
    o->field = s;                                                    \
    return Status::Ok();                                             \
  }
#define SECS(field)                                                  \
  [](ServeOptions* o, const std::string&, double d, int64_t, bool) { \
    o->field = d;                                                    \
    return Status::Ok();                                             \
  }
#define INT(field, type)                                             \
  [](ServeOptions* o, const std::string&, double, int64_t i, bool) { \
    o->field = type(i);                                              \
    return Status::Ok();                                             \
  }
#define RATE(field, name)                                                                 \
  [](ServeOptions* o, const std::string& s, double, int64_t, bool) {                      \
    Result<core::RateLimit> r = core::ParseRateLimit(s);                                  \
    if (!r.ok()) return Status::Invalid(std::string(name) + ": " + r.status().message()); \
    o->field = *r;                                                                        \
    return Status::Ok();                                                                  \
  }
#define BOOL(expr)                                                   \
  [](ServeOptions* o, const std::string&, double, int64_t, bool b) { \
    expr;                                                            \
    return Status::Ok();                                             \
  }

const std::vector<Spec>& Specs() {
  static const std::vector<Spec> specs = {
      {"db", Kind::kString, "SQLite database file (created if missing) [required]", STR(db)},
      {"listen", Kind::kString, "HOST:PORT to listen on; port 0 picks a free port (127.0.0.1:8080)",
       [](ServeOptions* o, const std::string& s, double, int64_t, bool) {
         return SetListen(o, s);
       }},
      {"data-dir", Kind::kString, "directory for blobs/ and signing.key [required]", STR(data_dir)},
      {"config", Kind::kString, "config file of `name = value` lines", nullptr},
      {"port-file", Kind::kString, "write the bound port here (atomically) once listening",
       STR(port_file)},
      {"public-url", Kind::kString,
       "base URL clients use to reach this server (http[s]://<listen>)",
       [](ServeOptions* o, const std::string& s, double, int64_t, bool) {
         o->core.public_url = s;
         while (!o->core.public_url.empty() && o->core.public_url.back() == '/') {
           o->core.public_url.pop_back();
         }
         o->public_url_set = true;
         return Status::Ok();
       }},
      {"heartbeat-interval", Kind::kSeconds, "seconds between agent heartbeats (30)",
       SECS(core.heartbeat_interval_s)},
      {"stall-after", Kind::kSeconds,
       "seconds without heartbeat before a lease expires (2 x interval)", SECS(core.stall_after_s)},
      {"maintenance-period", Kind::kSeconds, "seconds between maintenance ticks (60)",
       SECS(maintenance_period_s)},
      {"min-nodes", Kind::kInt, "autoscaler lower bound (0)", INT(core.autoscale_min, int)},
      {"max-nodes", Kind::kInt, "autoscaler upper bound (40)", INT(core.autoscale_max, int)},
      {"keep-checkpoints", Kind::kInt, "committed checkpoints kept per job (3)",
       INT(core.keep_checkpoints, int)},
      {"max-failures", Kind::kInt, "default distinct node failures before a job fails (3)",
       INT(core.default_max_failures, int)},
      {"quarantine-failures", Kind::kInt,
       "failed jobs within the window that quarantine a node (3)",
       INT(core.quarantine_failures, int)},
      {"quarantine-window", Kind::kSeconds, "window for quarantine-failures, seconds (3600)",
       SECS(core.quarantine_window_s)},
      {"verify-fraction", Kind::kSeconds,
       "default share of checkpoint commits replayed by another node, 0..1 (0)",
       SECS(core.verify_fraction)},
      {"retry-after", Kind::kSeconds, "Retry-After seconds when there is no work (5)",
       SECS(core.retry_after_s)},
      {"blob-url-ttl", Kind::kSeconds, "lifetime of signed blob URLs, seconds (900)",
       SECS(core.blob_url_ttl_s)},
      {"max-body", Kind::kInt, "largest JSON request body, bytes (1048576)",
       INT(core.max_request_body, int64_t)},
      {"max-upload-bytes", Kind::kInt, "largest developer upload, bytes (64 GiB)",
       INT(core.max_upload_bytes, int64_t)},
      {"max-checkpoint-bytes", Kind::kInt, "largest checkpoint object, bytes (16 GiB)",
       INT(core.max_checkpoint_bytes, int64_t)},
      {"max-output-bytes", Kind::kInt, "largest result file, bytes (16 GiB)",
       INT(core.max_output_bytes, int64_t)},
      {"developer-rate-limit", Kind::kString,
       "requests per second : burst per developer key, or off (10:100)",
       RATE(core.developer_rate, "developer-rate-limit")},
      {"node-rate-limit", Kind::kString,
       "requests per second : burst per node (agents' heartbeats, work polls) (2:60)",
       RATE(core.node_rate, "node-rate-limit")},
      {"operator-rate-limit", Kind::kString,
       "requests per second : burst per operator key (100:1000)",
       RATE(core.operator_rate, "operator-rate-limit")},
      {"enroll-rate-limit", Kind::kString,
       "requests per second : burst per enroll key (node registrations) (10:500)",
       RATE(core.enroll_rate, "enroll-rate-limit")},
      {"max-active-jobs", Kind::kInt,
       "pending + running jobs a developer key may hold; 0 = no limit (100)",
       INT(core.max_active_jobs, int64_t)},
      {"max-spec-bytes", Kind::kInt, "largest stored job spec, bytes (65536)",
       INT(core.max_spec_bytes, int64_t)},
      {"s3-endpoint", Kind::kString,
       "S3-compatible endpoint URL; set to store objects in S3 instead of the data dir",
       STR(core.s3.endpoint)},
      {"s3-bucket", Kind::kString, "S3 bucket", STR(core.s3.bucket)},
      {"s3-region", Kind::kString, "S3 region (us-east-1)", STR(core.s3.region)},
      {"s3-virtual-hosted", Kind::kBool, "virtual-hosted style URLs (bucket.host) (false)",
       BOOL(o->core.s3.path_style = !b)},
      {"threads", Kind::kInt,
       "blob transfer threads; each running upload or download holds one (64)", INT(threads, int)},
      {"db-readers", Kind::kInt, "database connections answering read-only queries (4)",
       INT(db_readers, int)},
      {"max-connections", Kind::kInt,
       "open client connections at most; more are accepted and closed at once (10000)",
       INT(max_connections, int)},
      {"header-timeout", Kind::kSeconds,
       "a request head must arrive whole this long after its first byte, else 408, seconds (10)",
       SECS(header_timeout_s)},
      {"keep-alive-timeout", Kind::kSeconds, "idle keep-alive connection timeout, seconds (5)",
       SECS(keep_alive_timeout_s)},
      {"io-timeout", Kind::kSeconds,
       "a socket read or write that makes no progress this long fails, seconds (30)",
       SECS(io_timeout_s)},
      {"blob-min-rate", Kind::kInt,
       "blob transfers slower than this many bytes per second on average, after the grace, "
       "are ended (16384)",
       INT(blob_min_rate, int64_t)},
      {"blob-rate-grace", Kind::kSeconds,
       "seconds a blob transfer may take before its average rate is checked (10)",
       SECS(blob_rate_grace_s)},
      {"log-level", Kind::kString, "debug, info, warn or error (info)", STR(log_level)},
      {"tls-cert", Kind::kString,
       "PEM certificate (then intermediates): serve HTTPS; re-read on SIGHUP", STR(tls_cert)},
      {"tls-key", Kind::kString, "PEM private key for --tls-cert; re-read on SIGHUP", STR(tls_key)},
      {"insecure-http", Kind::kBool,
       "allow plain HTTP on a non-loopback address (behind a TLS-terminating proxy) (false)",
       BOOL(o->insecure_http = b)},
      {"group-commit", Kind::kBool,
       "concurrent writes share one durable COMMIT (true); false: one commit per request",
       BOOL(o->group_commit = b)},
      // The autoscaler's pool provider (pool_options.h).
      {"pool-provider", Kind::kString,
       "where the autoscaler's target is applied: none, local, salad, kubernetes (none)",
       STR(pool.provider)},
      {"idle-window", Kind::kSeconds,
       "nodes that completed a job this recently stay warm; then scale to min (600)",
       SECS(core.autoscale_idle_window_s)},
      {"pool-agent-bin", Kind::kString, "local: the gleaner-agent binary (beside this one)",
       STR(pool.local.agent_bin)},
      {"pool-dir", Kind::kString, "local: agents' state dirs (<data-dir>/pool)",
       STR(pool.local.dir)},
      {"pool-agent-args", Kind::kString, "local: extra agent arguments, space-separated",
       [](ServeOptions* o, const std::string& s, double, int64_t, bool) {
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
      {"salad-api-url", Kind::kString, "salad: API base (https://api.salad.com/api/public)",
       STR(pool.salad.api_url)},
      {"salad-organization", Kind::kString, "salad: organization name",
       STR(pool.salad.organization)},
      {"salad-project", Kind::kString, "salad: project name", STR(pool.salad.project)},
      {"salad-container-group", Kind::kString, "salad: container group of agents",
       STR(pool.salad.group)},
      {"k8s-api-url", Kind::kString, "kubernetes: API server (https://kubernetes.default.svc)",
       STR(pool.kubernetes.api_url)},
      {"k8s-namespace", Kind::kString, "kubernetes: namespace (default)", STR(pool.kubernetes.ns)},
      {"k8s-deployment", Kind::kString, "kubernetes: Deployment of agents",
       STR(pool.kubernetes.deployment)},
      {"k8s-label-selector", Kind::kString, "kubernetes: label selector of the agents' pods",
       STR(pool.kubernetes.label_selector)},
      {"k8s-token-file", Kind::kString, "kubernetes: bearer token file (service account's)",
       STR(pool.kubernetes.token_file)},
      {"k8s-ca-file", Kind::kString, "kubernetes: CA bundle for the API server (system's)",
       STR(pool.kubernetes.ca_file)},
  };
  return specs;
}

#undef STR
#undef SECS
#undef INT
#undef BOOL
#undef RATE

const Spec* FindSpec(const std::string& name) {
  for (const Spec& s : Specs()) {
    if (name == s.name) return &s;
  }
  return nullptr;
}

std::string EnvName(const std::string& name) {
  std::string out = "GLEANER_";
  for (char c : name)
    out.push_back(c == '-' ? '_' : char(std::toupper(static_cast<unsigned char>(c))));
  return out;
}

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

// Parses and applies one value; `origin` names where it came from for the error line.
Status Apply(ServeOptions* o, const Spec& spec, const std::string& value,
             const std::string& origin) {
  double d = 0;
  int64_t i = 0;
  bool b = false;
  auto bad = [&](const std::string& want) {
    return Status::Invalid(origin + ": expected " + want + ", got '" + value + "'");
  };
  switch (spec.kind) {
    case Kind::kString:
      break;
    case Kind::kSeconds: {
      char* end = nullptr;
      errno = 0;
      d = std::strtod(value.c_str(), &end);
      if (value.empty() || errno != 0 || *end != '\0' || !std::isfinite(d) || d < 0 || d > 1e9) {
        return bad("a non-negative number of seconds");
      }
      break;
    }
    case Kind::kInt: {
      char* end = nullptr;
      errno = 0;
      long long v = std::strtoll(value.c_str(), &end, 10);
      if (value.empty() || errno != 0 || *end != '\0' || v < 0) {
        return bad("a non-negative integer");
      }
      i = v;
      break;
    }
    case Kind::kBool: {
      if (value == "true" || value == "1" || value == "yes" || value == "on") {
        b = true;
      } else if (value == "false" || value == "0" || value == "no" || value == "off") {
        b = false;
      } else {
        return bad("true or false");
      }
      break;
    }
  }
  return spec.set(o, value, d, i, b);
}

}  // namespace

Result<ServeOptions> ParseServeOptions(const std::vector<std::string>& args, const EnvLookup& env,
                                       const FileReader& read_file) {
  // 1. Collect flags (name → value), rejecting unknown ones.
  std::vector<std::pair<const Spec*, std::string>> flags;
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
    const Spec* spec = FindSpec(name);
    if (!spec) return Status::Invalid("unknown flag --" + name + " (see --help)");
    if (!has_value) {
      bool next_is_value = k + 1 < args.size() && args[k + 1].rfind("--", 0) != 0;
      if (spec->kind == Kind::kBool && !next_is_value) {
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
      flags.emplace_back(spec, value);
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
      const Spec* spec = FindSpec(name);
      if (!spec || name == "config")
        return Status::Invalid(origin + ": unknown setting '" + name + "'");
      GLEANER_RETURN_IF_ERROR(Apply(&o, *spec, Trim(line.substr(eq + 1)), origin + " " + name));
      seen.insert(name);
    }
  }
  // 3. Environment.
  for (const Spec& spec : Specs()) {
    if (std::string(spec.name) == "config") continue;
    std::string var = EnvName(spec.name);
    if (const char* v = env(var)) {
      GLEANER_RETURN_IF_ERROR(Apply(&o, spec, v, var));
      seen.insert(spec.name);
    }
  }
  // 4. Flags win.
  for (const auto& [spec, value] : flags) {
    GLEANER_RETURN_IF_ERROR(Apply(&o, *spec, value, std::string("--") + spec->name));
    seen.insert(spec->name);
  }
  // Credentials never come from flags (they would show in `ps`).
  if (const char* v = env("AWS_ACCESS_KEY_ID")) o.core.s3.access_key_id = v;
  if (const char* v = env("AWS_SECRET_ACCESS_KEY")) o.core.s3.secret_access_key = v;

  if (const char* v = env("SALAD_API_KEY")) o.pool.salad.api_key = v;
  // Without it, the local pool's agents get an enroll key of their own (main.cc), never the
  // operator token.
  if (const char* v = env("GLEANER_POOL_ENROLL_TOKEN")) o.pool.local.enroll_token = v;
  GLEANER_RETURN_IF_ERROR(o.pool.Validate());
  if (!seen.count("stall-after")) o.core.stall_after_s = 2 * o.core.heartbeat_interval_s;
  if (o.db.empty()) return Status::Invalid("--db is required (or GLEANER_DB)");
  if (o.data_dir.empty()) return Status::Invalid("--data-dir is required (or GLEANER_DATA_DIR)");
  if (!(o.maintenance_period_s > 0 && o.maintenance_period_s <= 86400)) {
    return Status::Invalid("--maintenance-period must be in (0, 86400] seconds");
  }
  if (o.threads < 1 || o.threads > 4096) return Status::Invalid("--threads must be in [1, 4096]");
  if (o.db_readers < 1 || o.db_readers > 256) {
    return Status::Invalid("--db-readers must be in [1, 256]");
  }
  if (o.max_connections < 1 || o.max_connections > 1000000) {
    return Status::Invalid("--max-connections must be in [1, 1000000]");
  }
  if (o.header_timeout_s < 0.1 || o.header_timeout_s > 3600) {
    return Status::Invalid("--header-timeout must be in [0.1, 3600] seconds");
  }
  if (o.blob_min_rate < 1 || !(o.blob_rate_grace_s >= 0.1 && o.blob_rate_grace_s <= 3600)) {
    return Status::Invalid("--blob-min-rate must be >= 1 and --blob-rate-grace in [0.1, 3600]");
  }
  if (!(o.io_timeout_s >= 0.1 && o.io_timeout_s <= 3600)) {
    return Status::Invalid("--io-timeout must be in [0.1, 3600] seconds");
  }
  if (!(o.keep_alive_timeout_s >= 0.001 && o.keep_alive_timeout_s <= 3600)) {
    return Status::Invalid("--keep-alive-timeout must be in [0.001, 3600] seconds");
  }
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
  for (const Spec& s : Specs()) {
    std::string flag = std::string("  --") + s.name;
    if (s.kind != Kind::kBool)
      flag += s.kind == Kind::kSeconds ? " S" : s.kind == Kind::kInt ? " N" : " V";
    if (flag.size() < 28) flag.resize(28, ' ');
    out += flag + " " + s.help + "\n";
  }
  return out;
}

}  // namespace gleaner::native
