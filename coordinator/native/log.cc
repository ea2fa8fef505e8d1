#include "coordinator/native/log.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>

#include "coordinator/core/http.h"
#include "coordinator/native/clock.h"

namespace gleaner::native {

namespace {
std::atomic<int> g_min_level{int(LogLevel::kInfo)};

const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarn:
      return "warn";
    case LogLevel::kError:
      return "error";
  }
  return "info";
}
}  // namespace

void SetLogLevel(LogLevel level) {
  g_min_level.store(int(level));
}

bool LogEnabled(LogLevel level) {
  return int(level) >= g_min_level.load(std::memory_order_relaxed);
}

void Log(LogLevel level, const std::string& msg, const Json& fields) {
  if (!LogEnabled(level)) return;
  Json line = Json::object();
  line["ts"] = core::FormatTime(DefaultClock().NowMs());
  line["level"] = LevelName(level);
  line["msg"] = msg;
  if (fields.is_object()) {
    for (auto it = fields.begin(); it != fields.end(); ++it) line[it.key()] = it.value();
  }
  std::string text = DumpJson(line);
  text.push_back('\n');
  // One write per line: O_APPEND-like atomicity for pipes/files up to PIPE_BUF, and in practice
  // no interleaving for regular files.
  const char* p = text.data();
  size_t left = text.size();
  while (left > 0) {
    ssize_t n = ::write(STDERR_FILENO, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    p += n;
    left -= size_t(n);
  }
}

}  // namespace gleaner::native
