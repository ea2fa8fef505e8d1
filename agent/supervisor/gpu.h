// What GPU this machine offers: NVML (libnvidia-ml.so.1, loaded at run time, never a link
// dependency) when present, else {"cpu", 0}.
#pragma once

#include <cstdint>
#include <string>

namespace gleaner::agent {

struct GpuInfo {
  std::string name = "cpu";
  int64_t vram_mb = 0;
};

GpuInfo DetectGpu();

}  // namespace gleaner::agent
