// Process-wide libtorch settings that benchmarks and GPU checks choose through the environment.
// gleaner-train's main applies them once, before any CUDA work:
//
//   GLEANER_DETERMINISTIC=1   deterministic kernels only (an op without one fails the run), as
//                             torch.use_deterministic_algorithms(True); also sets
//                             CUBLAS_WORKSPACE_CONFIG=:4096:8 unless it is set already.
//   GLEANER_ATTENTION=explicit   read by attention.cc (see attention.h).
//   GLEANER_CPU_THREADS=N     libtorch's intra-op threads on the CPU (default 1). A CPU sum
//                             depends on how it is split over threads (1 vs 2 threads moves fp32
//                             LoRA tensors by ~1e-6 within 10 steps), so a fixed count is what
//                             makes CPU training, resumes and replays byte-identical across nodes
//                             with different core counts (same libtorch build and CPU kernels).
//                             The trainer's CPU work is tiny models and tests: one thread costs
//                             little there; a GPU run does its heavy work on the GPU.
//
// Other values, or the variables unset, leave libtorch's defaults. Torch-free header, so that
// main.cc stays free of libtorch includes. Not thread-safe (call before starting threads).
#pragma once

namespace gleaner::train {

void ApplyTorchEnvironment();

}  // namespace gleaner::train
