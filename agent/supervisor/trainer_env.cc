#include "agent/supervisor/trainer_env.h"

#include <algorithm>
#include <cstring>

namespace gleaner::agent {
namespace {

// Whole names.
const char* const kNames[] = {"PATH",     "HOME", "USER",   "LANG",
                              "LANGUAGE", "TZ",   "TMPDIR", "LD_LIBRARY_PATH"};
// Name prefixes.
const char* const kPrefixes[] = {
    "LC_",  "CUDA_",     "NVIDIA_", "NCCL_",    "CUBLAS_",           "CUDNN_", "OMP_", "MKL_",
    "KMP_", "OPENBLAS_", "TORCH_",  "PYTORCH_", "GLEANER_SYNTHETIC_"};

bool Allowed(const char* entry) {
  const char* eq = std::strchr(entry, '=');
  if (eq == nullptr) return false;
  const size_t n = size_t(eq - entry);
  for (const char* name : kNames) {
    if (std::strlen(name) == n && std::strncmp(entry, name, n) == 0) return true;
  }
  for (const char* prefix : kPrefixes) {
    const size_t p = std::strlen(prefix);
    if (n > p && std::strncmp(entry, prefix, p) == 0) return true;
  }
  return false;
}

}  // namespace

std::vector<std::string> TrainerEnvironment(const char* const* env) {
  std::vector<std::string> out;
  for (const char* const* e = env; e != nullptr && *e != nullptr; ++e) {
    if (Allowed(*e)) out.emplace_back(*e);
  }
  return out;
}

TrainerLimits TrainerLimitsFor(const std::string& gpu_name, int64_t vram_mb, int64_t host_bytes) {
  TrainerLimits t;
  const bool gpu = gpu_name != "cpu" && vram_mb > 0;
  t.budget.host_bytes = std::max<int64_t>(0, host_bytes);
  t.budget.device_bytes = gpu ? vram_mb * 1024 * 1024 : 0;
  t.rlimits.max_processes = kTrainerMaxProcesses;
  if (!gpu) t.rlimits.data_bytes = t.budget.host_bytes;
  return t;
}

}  // namespace gleaner::agent
