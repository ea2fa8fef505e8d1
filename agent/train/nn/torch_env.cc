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
}

}  // namespace gleaner::train
