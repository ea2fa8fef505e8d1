#include "coordinator/core/settings.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "shared/model_manifest.h"

namespace gleaner::core {

namespace {

// Shortest decimal text of a number of seconds or bytes ("30", "0.25", "68719476736").
std::string NumberText(double v) {
  if (v == std::floor(v) && std::fabs(v) < 9e15) return std::to_string(int64_t(v));
  std::string s = std::to_string(v);
  while (!s.empty() && s.back() == '0') s.pop_back();
  return s;
}

// The table's entries: where a value lives in CoreConfig, written once per kind.
#define SECONDS(field)                                                \
  [](CoreConfig* c, const SettingValue& v) { c->field = v.seconds; }, \
      [](const CoreConfig& c) { return NumberText(c.field); }
#define INTEGER(field, type)                                                \
  [](CoreConfig* c, const SettingValue& v) { c->field = type(v.integer); }, \
      [](const CoreConfig& c) { return std::to_string(c.field); }
#define RATE(field)                                                \
  [](CoreConfig* c, const SettingValue& v) { c->field = v.rate; }, \
      [](const CoreConfig& c) { return FormatRateLimit(c.field); }
#define TEXT(field)                                                \
  [](CoreConfig* c, const SettingValue& v) { c->field = v.text; }, \
      [](const CoreConfig& c) { return c.field; }

constexpr double kNoMax = 9.2e18;  // below INT64_MAX as a double
constexpr double kBigSeconds = 1e9;

}  // namespace

const std::vector<Setting>& CoreSettings() {
  using K = SettingKind;
  static const std::vector<Setting>* table = new std::vector<Setting>{
      {"heartbeat-interval", K::kSeconds, 0.001, 3600, "seconds between agent heartbeats",
       SECONDS(heartbeat_interval_s)},
      {"stall-after", K::kSeconds, 0.001, 86400,
       "seconds without a heartbeat before a lease expires (at least heartbeat-interval)",
       SECONDS(stall_after_s), "2 x heartbeat-interval"},
      {"min-nodes", K::kInt, 0, 100000, "autoscaler lower bound", INTEGER(autoscale_min, int)},
      {"max-nodes", K::kInt, 0, 100000, "autoscaler upper bound", INTEGER(autoscale_max, int)},
      {"idle-window", K::kSeconds, 0, 604800,
       "nodes that completed a job this recently stay warm; then scale to min-nodes",
       SECONDS(autoscale_idle_window_s)},
      {"keep-checkpoints", K::kInt, 1, 100, "committed checkpoints kept per job",
       INTEGER(keep_checkpoints, int)},
      {"max-failures", K::kInt, 1, 100, "default distinct node failures before a job fails",
       INTEGER(default_max_failures, int)},
      {"quarantine-failures", K::kInt, 0, 1000000,
       "failed jobs within quarantine-window that quarantine a node",
       INTEGER(quarantine_failures, int)},
      {"quarantine-window", K::kSeconds, 0, kBigSeconds, "window of quarantine-failures, seconds",
       SECONDS(quarantine_window_s)},
      {"retry-after", K::kSeconds, 0, kBigSeconds, "Retry-After seconds when there is no work",
       SECONDS(retry_after_s)},
      {"verify-fraction", K::kNumber, 0, 1,
       "default share of a job's checkpoint commits another node replays to check them",
       [](CoreConfig* c, const SettingValue& v) { c->verify_fraction = v.number; },
       [](const CoreConfig& c) { return NumberText(c.verify_fraction); }},
      {"verify-max-wait", K::kSeconds, 0, kBigSeconds,
       "seconds a replay waits for an idle verifying node before it goes ahead of queued jobs",
       SECONDS(verify_max_wait_s)},
      {"progress-timeout", K::kSeconds, 0, kBigSeconds,
       "seconds a job lease may go without its step advancing (from its start too) before it "
       "ends as a failure of its node, unbilled beyond; 0 = off",
       SECONDS(progress_timeout_s)},
      {"public-url", K::kString, 0, 0,
       "base URL clients use to reach this coordinator (blob URLs are built on it)",
       [](CoreConfig* c, const SettingValue& v) {
         c->public_url = v.text;
         while (!c->public_url.empty() && c->public_url.back() == '/') c->public_url.pop_back();
       },
       [](const CoreConfig& c) { return c.public_url; }, "this server's own address"},
      {"blob-url-ttl", K::kSeconds, 0, kBigSeconds, "lifetime of signed blob URLs, seconds",
       SECONDS(blob_url_ttl_s)},
      {"max-body", K::kInt, 0, kNoMax, "largest JSON request body, bytes",
       INTEGER(max_request_body, int64_t)},
      {"max-upload-bytes", K::kInt, 0, kNoMax, "largest developer upload, bytes",
       INTEGER(max_upload_bytes, int64_t)},
      {"max-checkpoint-bytes", K::kInt, 0, kNoMax, "largest checkpoint object, bytes",
       INTEGER(max_checkpoint_bytes, int64_t)},
      {"max-output-bytes", K::kInt, 0, kNoMax, "largest result file, bytes",
       INTEGER(max_output_bytes, int64_t)},
      {"lease-max-outputs", K::kInt, 1, 64, "result files one lease may upload",
       INTEGER(lease_max_outputs, int64_t)},
      {"lease-max-output-bytes", K::kInt, 0, kNoMax, "bytes of result files one lease may upload",
       INTEGER(lease_max_output_bytes, int64_t)},
      {"lease-max-uncommitted-bytes", K::kInt, 0, kNoMax,
       "bytes of checkpoints and sample images one lease may hold uploaded but not committed",
       INTEGER(lease_max_uncommitted_bytes, int64_t)},
      {"uncommitted-grace", K::kSeconds, 0, kBigSeconds,
       "seconds after its upload URL before maintenance collects an object no commit names",
       SECONDS(uncommitted_grace_s)},
      {"max-pending-uploads", K::kInt, 0, kNoMax,
       "upload reservations not yet stored that one developer key may hold",
       INTEGER(max_pending_uploads, int64_t)},
      {"max-pending-upload-bytes", K::kInt, 0, kNoMax,
       "bytes of the upload reservations not yet stored of one developer key",
       INTEGER(max_pending_upload_bytes, int64_t)},
      {"blob-gc-grace", K::kSeconds, 0, kBigSeconds,
       "seconds before maintenance deletes an object nothing refers to", SECONDS(blob_gc_grace_s)},
      {"blob-min-rate", K::kInt, 1, kNoMax,
       "blob transfers slower than this many bytes per second on average, after the grace, "
       "are ended",
       INTEGER(blob_min_rate, int64_t)},
      {"blob-rate-grace", K::kSeconds, 0.1, 3600,
       "seconds a blob transfer may take before its average rate is checked",
       SECONDS(blob_rate_grace_s)},
      {"developer-rate-limit", K::kRate, 0, 0,
       "requests per second : burst per developer key, or off", RATE(developer_rate)},
      {"node-rate-limit", K::kRate, 0, 0,
       "requests per second : burst per node (heartbeats, work polls), or off", RATE(node_rate)},
      {"operator-rate-limit", K::kRate, 0, 0,
       "requests per second : burst per operator key, or off", RATE(operator_rate)},
      {"enroll-rate-limit", K::kRate, 0, 0,
       "requests per second : burst per enroll key (node registrations), or off",
       RATE(enroll_rate)},
      {"enroll-address-rate-limit", K::kRate, 0, 0,
       "requests per second : burst per client address for enroll-key node registrations, or off",
       RATE(enroll_address_rate)},
      {"enroll-max-nodes", K::kInt, 0, kNoMax,
       "nodes one enroll key may have registered and not revoked, unless the key sets its own "
       "max_nodes; 0 = no limit",
       INTEGER(enroll_max_nodes, int64_t)},
      {"max-active-jobs", K::kInt, 0, kNoMax,
       "pending + running jobs a developer key may hold; 0 = no limit",
       INTEGER(max_active_jobs, int64_t)},
      {"max-spec-bytes", K::kInt, 1024, 1 << 30, "largest stored job spec, bytes",
       INTEGER(max_spec_bytes, int64_t)},
      {"model-hosts", K::kString, 0, 0,
       "comma-separated host names whose http(s) URLs model.files may name (nodes refuse "
       "private addresses whatever is listed); empty = model files must be uploads",
       [](CoreConfig* c, const SettingValue& v) {
         c->model_hosts.clear();
         size_t start = 0;
         while (start <= v.text.size()) {
           size_t comma = v.text.find(',', start);
           if (comma == std::string::npos) comma = v.text.size();
           std::string name = v.text.substr(start, comma - start);
           while (!name.empty() && name.back() == ' ') name.pop_back();
           while (!name.empty() && name.front() == ' ') name.erase(0, 1);
           // An invalid name is kept as given: Validate() refuses it with its text.
           std::string norm = NormalizeHostName(name);
           if (!name.empty()) c->model_hosts.push_back(norm.empty() ? "!" + name : norm);
           start = comma + 1;
         }
       },
       [](const CoreConfig& c) {
         std::string out;
         for (const std::string& h : c.model_hosts) out += (out.empty() ? "" : ",") + h;
         return out;
       }},
      {"s3-endpoint", K::kString, 0, 0,
       "S3-compatible endpoint URL; set to store objects in S3 instead of the shell's store",
       TEXT(s3.endpoint), "off"},
      {"s3-bucket", K::kString, 0, 0, "S3 bucket", TEXT(s3.bucket)},
      {"s3-region", K::kString, 0, 0, "S3 region", TEXT(s3.region)},
      {"s3-virtual-hosted", K::kBool, 0, 0, "virtual-hosted style S3 URLs (bucket.host)",
       [](CoreConfig* c, const SettingValue& v) { c->s3.path_style = !v.flag; },
       [](const CoreConfig& c) { return std::string(c.s3.path_style ? "false" : "true"); }},
  };
  return *table;
}

#undef SECONDS
#undef INTEGER
#undef RATE
#undef TEXT

Result<SettingValue> ParseSettingValue(SettingKind kind, const std::string& text, double min,
                                       double max) {
  SettingValue v;
  v.text = text;
  auto expected = [&](const std::string& what) {
    return Status::Invalid("expected " + what + ", got '" + text + "'");
  };
  auto in_range = [&](double x) -> Status {
    if (x >= min && x <= max) return Status::Ok();
    return Status::Invalid("must be in [" + NumberText(min) + ", " + NumberText(max) + "], got '" +
                           text + "'");
  };
  switch (kind) {
    case SettingKind::kString:
      break;
    case SettingKind::kSeconds:
    case SettingKind::kNumber: {
      char* end = nullptr;
      errno = 0;
      double d = std::strtod(text.c_str(), &end);
      if (text.empty() || errno != 0 || *end != '\0' || !std::isfinite(d) || d < 0) {
        return expected(kind == SettingKind::kSeconds ? "a non-negative number of seconds"
                                                      : "a non-negative number");
      }
      GLEANER_RETURN_IF_ERROR(in_range(d));
      (kind == SettingKind::kSeconds ? v.seconds : v.number) = d;
      break;
    }
    case SettingKind::kInt: {
      char* end = nullptr;
      errno = 0;
      long long i = std::strtoll(text.c_str(), &end, 10);
      if (text.empty() || errno != 0 || *end != '\0' || i < 0) {
        return expected("a non-negative integer");
      }
      v.integer = i;
      GLEANER_RETURN_IF_ERROR(in_range(double(i)));
      break;
    }
    case SettingKind::kBool:
      if (text == "true" || text == "1" || text == "yes" || text == "on") {
        v.flag = true;
      } else if (!(text == "false" || text == "0" || text == "no" || text == "off")) {
        return expected("true or false");
      }
      break;
    case SettingKind::kRate: {
      Result<RateLimit> r = ParseRateLimit(text);
      if (!r.ok()) return r.status();
      v.rate = *r;
      break;
    }
  }
  return v;
}

const Setting* FindCoreSetting(std::string_view name) {
  for (const Setting& s : CoreSettings()) {
    if (name == s.name) return &s;
  }
  return nullptr;
}

std::string SettingEnvName(std::string_view name) {
  std::string out = "GLEANER_";
  for (char c : name) out.push_back(c == '-' ? '_' : (c >= 'a' && c <= 'z') ? char(c - 32) : c);
  return out;
}

std::string SettingDefault(const Setting& s) {
  if (s.default_doc) return s.default_doc;
  std::string text = s.get(CoreConfig());
  return text.empty() ? "none" : text;
}

std::string SettingRange(const Setting& s) {
  switch (s.kind) {
    case SettingKind::kSeconds:
      return "seconds in [" + NumberText(s.min) + ", " + NumberText(s.max) + "]";
    case SettingKind::kNumber:
      return "number in [" + NumberText(s.min) + ", " + NumberText(s.max) + "]";
    case SettingKind::kInt:
      return s.max >= kNoMax ? "integer >= " + NumberText(s.min)
                             : "integer in [" + NumberText(s.min) + ", " + NumberText(s.max) + "]";
    case SettingKind::kBool:
      return "true or false";
    case SettingKind::kRate:
      return "RATE:BURST or off";
    case SettingKind::kString:
      break;
  }
  return "text";
}

Status ApplyCoreSetting(CoreConfig* config, const Setting& s, const std::string& text,
                        const std::string& origin) {
  Result<SettingValue> v = ParseSettingValue(s.kind, text, s.min, s.max);
  if (!v.ok()) return Status::Invalid(origin + ": " + v.status().message());
  s.set(config, *v);
  return Status::Ok();
}

void DeriveCoreDefaults(CoreConfig* config, const std::set<std::string>& given) {
  if (!given.count("stall-after")) config->stall_after_s = 2 * config->heartbeat_interval_s;
}

}  // namespace gleaner::core
