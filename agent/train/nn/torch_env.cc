#include "agent/train/nn/torch_env.h"

#include <cstdlib>
#include <cstring>

#include "agent/train/nn/torch_compat.h"

namespace gleaner::train {

void ApplyTorchEnvironment() {
  const char* det = std::getenv("GLEANER_DETERMINISTIC");
  if (det != nullptr && std::strcmp(det, "1") == 0) {
    // cuBLAS reads this when CUDA starts; libtorch refuses cuBLAS calls without it.
    ::setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", /*overwrite=*/0);
    UseDeterministicAlgorithms();
  }
  const char* threads = std::getenv("GLEANER_CPU_THREADS");
  long n = threads != nullptr ? std::strtol(threads, nullptr, 10) : 1;
  torch::set_num_threads(n >= 1 && n <= 1024 ? int(n) : 1);
}

}  // namespace gleaner::train
