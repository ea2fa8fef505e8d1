// Structured logs: one JSON object per line on stderr.
//
// Every line carries "ts" (ISO-8601 UTC), "level" and "msg"; callers add fields (for requests:
// request_id, method, path, status, latency_ms). Lines are written whole with one write(2) so
// lines from concurrent threads never interleave. Thread-safe.
#pragma once

#include <string>

#include "shared/json.h"

namespace gleaner::native {

enum class LogLevel { kDebug, kInfo, kWarn, kError };

// Writes {"ts","level","msg", ...fields} to stderr. `fields` must be an object (or null).
void Log(LogLevel level, const std::string& msg, const Json& fields = Json::object());

inline void LogInfo(const std::string& msg, const Json& fields = Json::object()) {
  Log(LogLevel::kInfo, msg, fields);
}
inline void LogWarn(const std::string& msg, const Json& fields = Json::object()) {
  Log(LogLevel::kWarn, msg, fields);
}
inline void LogError(const std::string& msg, const Json& fields = Json::object()) {
  Log(LogLevel::kError, msg, fields);
}

// Lines below this level are dropped (default kInfo).
void SetLogLevel(LogLevel level);

// True when a line of this level would be written (to skip building fields for nothing).
bool LogEnabled(LogLevel level);

}  // namespace gleaner::native
