// What GPU this machine offers and how hot it runs, through NVML (libnvidia-ml.so.1, loaded at
// run time, never a link dependency). Without NVML: {"cpu", 0} and no temperatures.
//
// A selection is the owner's `gpus` list (CUDA indices, in PCI bus order, or GPU-/MIG- UUIDs);
// empty = every GPU. Thread-compatible: one Nvml per thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gleaner::agent {

struct GpuInfo {
  std::string name = "cpu";
  int64_t vram_mb = 0;
};

class Nvml {
 public:
  Nvml();  // loads and initialises NVML when present
  ~Nvml();
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;
  bool available() const { return lib_ != nullptr; }
  // The first selected GPU (the one the trainer sees as device 0); {"cpu", 0} when none.
  GpuInfo First(const std::vector<std::string>& selection);
  // The hottest selected GPU in degrees C; nullopt when no temperature can be read.
  std::optional<double> MaxTemperatureC(const std::vector<std::string>& selection);

 private:
  std::vector<void*> Devices(const std::vector<std::string>& selection);
  void* lib_ = nullptr;
  struct Fns;
  Fns* fn_ = nullptr;
};

// Nvml().First(selection).
GpuInfo DetectGpu(const std::vector<std::string>& selection = {});

}  // namespace gleaner::agent
