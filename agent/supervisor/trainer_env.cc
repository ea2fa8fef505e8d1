#include "agent/supervisor/trainer_env.h"

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

}  // namespace gleaner::agent
