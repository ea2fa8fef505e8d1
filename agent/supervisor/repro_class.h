// The node's reproducibility class (docs/architecture.md "Verified training", coordinator
// core/repro_class.h): what the agent can tell about the stack its trainer computes with, sent
// at registration and with every claim, so that a replay goes only to a node whose results are
// bit-identical. What the agent knows without starting the trainer: the GPU model ("cpu" when
// none), the device kind, libtorch's CPU thread count (GLEANER_CPU_THREADS, default 1, as the
// trainer pins it), the trainer build (the first 16 hex digits of the trainer binary's sha256:
// the same build links the same libtorch when it carries it), and on CPU nodes the CPU family
// and model (/proc/cpuinfo). Not known to the agent yet: the driver, compute capability, SM
// count and the CUDA/cuDNN versions (left out; nodes that differ only there share a class).
// Reads files; never fails (missing facts are left out). Thread-compatible.
#pragma once

#include <string>

#include "agent/supervisor/gpu.h"
#include "shared/json.h"

namespace gleaner::agent {

Json DetectReproClass(const GpuInfo& gpu, const std::string& trainer_path);

}  // namespace gleaner::agent
