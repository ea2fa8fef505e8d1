// The environment gleaner-train gets: only what a trainer needs from the agent's environment
// (search path, locale, temp dir, the GPU selection and the CUDA/BLAS/torch tuning variables,
// and the synthetic kind's test hooks). Everything else stays with the agent: its enroll token,
// its settings (GLEANER_*), cloud and pool credentials. A trainer runs a job's code paths on
// outside data and must not be able to hand anyone the agent's secrets.
//
// And its limits (TrainerLimitsFor): the memory budget it checks its estimate against before
// allocating (agent/protocol/memory_budget.h: the node's VRAM on a GPU node, the host RAM
// available at the job's start capped by the agent's cgroup), and hard rlimits: RLIMIT_NPROC on
// every node, RLIMIT_DATA = the host budget on CPU-only nodes. A GPU trainer gets no RLIMIT_DATA
// or RLIMIT_AS: the CUDA driver maps large private regions for its own use (RLIMIT_AS breaks
// cuInit outright), so there the ceiling is the estimate check plus the service's MemoryMax or
// the container's --memory (docs/agent.md, "Limits").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "agent/protocol/memory_budget.h"
#include "agent/supervisor/child_process.h"

namespace gleaner::agent {

// "NAME=value" entries of env (a null-terminated array like environ) that a trainer may see,
// in their original order.
std::vector<std::string> TrainerEnvironment(const char* const* env);

// Processes and threads a trainer's user may have (libtorch starts a few dozen threads).
constexpr int64_t kTrainerMaxProcesses = 4096;

struct TrainerLimits {
  MemoryBudget budget;  // handed over with BudgetEnvironment
  ChildLimits rlimits;
};

// vram_mb: the advertised VRAM (0 or gpu "cpu": a CPU node); host_bytes: the host RAM the
// trainer may take (DetectHostMemoryBytes; 0 = unknown: no budget, no RLIMIT_DATA).
TrainerLimits TrainerLimitsFor(const std::string& gpu_name, int64_t vram_mb, int64_t host_bytes);

}  // namespace gleaner::agent
