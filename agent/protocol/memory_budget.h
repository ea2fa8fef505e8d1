// How much memory a trainer may use: the agent hands it over in the trainer's environment
// (job_runner.cc, with BudgetEnvironment), the trainer reads it with ReadMemoryBudget and checks
// its estimate against it (training/memory_estimate.h) before allocating.
//
//   GLEANER_MEMORY_BUDGET_BYTES  host RAM the trainer may use (the agent: the smaller of the
//                                RAM available when the job starts and its cgroup's limit)
//   GLEANER_VRAM_BUDGET_BYTES    GPU memory it may use (the agent: the advertised VRAM, which
//                                honours the owner's max_vram_mb); unset or 0 on a CPU node
//
// Without GLEANER_MEMORY_BUDGET_BYTES the host budget is read here the same way: MemAvailable
// from /proc/meminfo, capped by the cgroup v2 (memory.max - memory.current) or v1
// (memory.limit_in_bytes - memory.usage_in_bytes) limit of this process. 0 = unknown (no check).
// The parsers are pure (tests feed them text); ReadMemoryBudget reads the environment and
// files. Thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gleaner {

struct MemoryBudget {
  int64_t host_bytes = 0;    // 0 = unknown
  int64_t device_bytes = 0;  // 0 = unknown or no GPU
};

// MemAvailable of a /proc/meminfo text, in bytes; 0 when absent.
int64_t ParseMemAvailable(const std::string& meminfo);
// A cgroup limit file's value ("max" or a byte count); 0 = no limit or unreadable.
int64_t ParseCgroupLimit(const std::string& text);
// Host RAM this process can still take: MemAvailable capped by its cgroup's room; 0 = unknown.
// `root` is prepended to /proc and /sys paths (tests).
int64_t DetectHostMemoryBytes(const std::string& root = "");

constexpr char kMemoryBudgetEnv[] = "GLEANER_MEMORY_BUDGET_BYTES";
constexpr char kVramBudgetEnv[] = "GLEANER_VRAM_BUDGET_BYTES";

// "NAME=value" entries for a trainer's environment (a 0 budget is left out).
std::vector<std::string> BudgetEnvironment(const MemoryBudget& b);
// The trainer's side: the environment's budget, the host's detected when none is given.
MemoryBudget ReadMemoryBudget();

}  // namespace gleaner
