// Process-wide libtorch settings that benchmarks and GPU checks choose through the environment.
// gleaner-train's main applies them once, before any CUDA work:
//
//   GLEANER_DETERMINISTIC=1   deterministic kernels only (an op without one fails the run), as
//                             torch.use_deterministic_algorithms(True); also sets
//                             CUBLAS_WORKSPACE_CONFIG=:4096:8 unless it is set already.
//   GLEANER_ATTENTION=explicit   read by attention.cc (see attention.h).
//
// Other values, or the variables unset, leave libtorch's defaults. Torch-free header, so that
// main.cc stays free of libtorch includes. Not thread-safe (call before starting threads).
#pragma once

namespace gleaner::train {

void ApplyTorchEnvironment();

}  // namespace gleaner::train
