// The coordinator's settings table: every setting the core's decisions depend on, once, with its
// name, kind, range, default (read from a default CoreConfig) and a one-line doc. Both shells
// iterate it instead of naming settings themselves:
//   native (coordinator/native/options.h): flag --NAME, environment GLEANER_NAME, config-file
//     line `NAME = VALUE`;
//   edge (wasm/worker.mjs): Worker variable GLEANER_NAME, or key NAME of the GLEANER_CONFIG JSON
//     object (wasm/wire_json.h ConfigFromJson; JSON numbers and booleans count as their text).
// One syntax everywhere: seconds and integers are non-negative decimals (seconds may be
// fractional), booleans true/false/1/0/yes/no/on/off, rates "RATE:BURST" or "off". A value
// outside the setting's [min, max] is refused with one line naming where it came from.
// Settings of one shell only (listen address, threads, TLS, pool provider) stay in that shell and
// parse their values with ParseSettingValue, so the syntax is the same.
// Secrets (blob signing key, S3 credentials) are not settings: each shell reads them itself.
// Portable: no I/O; the table is built once and never changes.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "coordinator/core/config.h"
#include "coordinator/core/rate_limit.h"
#include "shared/status.h"

namespace gleaner::core {

enum class SettingKind { kString, kSeconds, kNumber, kInt, kBool, kRate };

// A parsed value; the field of the setting's kind is filled (text always).
struct SettingValue {
  std::string text;
  double seconds = 0;  // kSeconds
  double number = 0;   // kNumber
  int64_t integer = 0;
  bool flag = false;
  RateLimit rate;
};

// Parses `text` as `kind`; numbers must lie in [min, max]. The error is "expected ..., got 'x'"
// (or "must be in [min, max], got 'x'"), for the caller to prefix with the origin.
Result<SettingValue> ParseSettingValue(SettingKind kind, const std::string& text, double min,
                                       double max);

struct Setting {
  const char* name;  // lower case, '-' between words
  SettingKind kind;
  double min, max;  // kSeconds, kInt: inclusive range
  const char* doc;  // one line, without the default
  void (*set)(CoreConfig* config, const SettingValue& value);
  std::string (*get)(const CoreConfig& config);  // the value as setting text
  const char* default_doc = nullptr;  // when the default is derived, how (else get(CoreConfig{}))
};

// Every core setting, in the order --help lists them.
const std::vector<Setting>& CoreSettings();
const Setting* FindCoreSetting(std::string_view name);

// "GLEANER_" + the name in upper case, '-' → '_' (heartbeat-interval → GLEANER_HEARTBEAT_INTERVAL).
std::string SettingEnvName(std::string_view name);
// The default as shown to operators: default_doc, or the text of a default CoreConfig's value.
std::string SettingDefault(const Setting& s);
// "seconds in [0.001, 3600]"-style description of what the setting accepts, for --help.
std::string SettingRange(const Setting& s);

// Parses `text` and stores it in `config`; an error names `origin` ("--max-nodes",
// "GLEANER_MAX_NODES", "config.conf:3 max-nodes", "config.max-nodes").
Status ApplyCoreSetting(CoreConfig* config, const Setting& s, const std::string& text,
                        const std::string& origin);

// After every source is applied: defaults that follow other settings (stall-after = 2 ×
// heartbeat-interval unless `given` names it). Then config->Validate() checks the combination.
void DeriveCoreDefaults(CoreConfig* config, const std::set<std::string>& given);

}  // namespace gleaner::core
