// One-line log records on stderr: "2026-01-01T00:00:00.123Z gleaner-agent: message".
// Thread-safe.
#pragma once

namespace gleaner::agent {

void Log(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace gleaner::agent
