#include "agent/protocol/memory_budget.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace gleaner {
namespace {

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  if (!in) return "";
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

int64_t ParseBytes(const std::string& text) {
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || end == text.c_str() || v <= 0) return 0;
  while (*end == ' ' || *end == '\n') ++end;
  return *end == '\0' ? int64_t(v) : 0;
}

// The cgroup (v2: "0::/path"; v1: the memory controller's line) of this process.
std::string CgroupPath(const std::string& root, bool* v2) {
  std::istringstream lines(Slurp(root + "/proc/self/cgroup"));
  std::string line, v1_path, v2_path;
  while (std::getline(lines, line)) {
    if (line.rfind("0::", 0) == 0) v2_path = line.substr(3);
    size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    std::string controllers = "," + line.substr(a + 1, b - a - 1) + ",";
    if (controllers.find(",memory,") != std::string::npos) v1_path = line.substr(b + 1);
  }
  *v2 = v1_path.empty();
  return *v2 ? v2_path : v1_path;
}

// Room left under this process's cgroup limit (the nearest limited ancestor); 0 = no limit.
int64_t CgroupRoom(const std::string& root) {
  bool v2 = true;
  std::string path = CgroupPath(root, &v2);
  const std::string base = root + (v2 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/memory");
  for (;;) {
    const std::string dir = base + (path == "/" ? "" : path);
    int64_t limit = ParseCgroupLimit(Slurp(dir + (v2 ? "/memory.max" : "/memory.limit_in_bytes")));
    // cgroup v1 says "no limit" with a huge number (PAGE_COUNTER_MAX pages).
    if (limit > (int64_t(1) << 60)) limit = 0;
    if (limit > 0) {
      int64_t used = ParseBytes(Slurp(dir + (v2 ? "/memory.current" : "/memory.usage_in_bytes")));
      return std::max<int64_t>(1, limit - used);
    }
    if (path.empty() || path == "/") return 0;
    size_t slash = path.rfind('/');
    path = slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
  }
}

int64_t EnvBytes(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? 0 : ParseBytes(v);
}

}  // namespace

int64_t ParseMemAvailable(const std::string& meminfo) {
  std::istringstream lines(meminfo);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream fields(line.substr(13));
    long long kb = 0;
    std::string unit;
    if (!(fields >> kb) || kb <= 0) return 0;
    fields >> unit;
    return int64_t(kb) * (unit == "kB" || unit.empty() ? 1024 : 1);
  }
  return 0;
}

int64_t ParseCgroupLimit(const std::string& text) {
  if (text.rfind("max", 0) == 0) return 0;
  return ParseBytes(text);
}

int64_t DetectHostMemoryBytes(const std::string& root) {
  int64_t available = ParseMemAvailable(Slurp(root + "/proc/meminfo"));
  int64_t room = CgroupRoom(root);
  if (available == 0) return room;
  return room == 0 ? available : std::min(available, room);
}

std::vector<std::string> BudgetEnvironment(const MemoryBudget& b) {
  std::vector<std::string> env;
  if (b.host_bytes > 0)
    env.push_back(std::string(kMemoryBudgetEnv) + "=" + std::to_string(b.host_bytes));
  if (b.device_bytes > 0)
    env.push_back(std::string(kVramBudgetEnv) + "=" + std::to_string(b.device_bytes));
  return env;
}

MemoryBudget ReadMemoryBudget() {
  MemoryBudget b;
  b.host_bytes = EnvBytes(kMemoryBudgetEnv);
  if (b.host_bytes == 0) b.host_bytes = DetectHostMemoryBytes();
  b.device_bytes = EnvBytes(kVramBudgetEnv);
  return b;
}

}  // namespace gleaner
