#include "agent/supervisor/gpu.h"

#include <dlfcn.h>

namespace gleaner::agent {
namespace {

struct NvmlMemory {
  unsigned long long total, free, used;
};
using InitFn = int (*)();
using CountFn = int (*)(unsigned int*);
using HandleFn = int (*)(unsigned int, void**);
using NameFn = int (*)(void*, char*, unsigned int);
using MemFn = int (*)(void*, NvmlMemory*);
using ShutdownFn = int (*)();

}  // namespace

GpuInfo DetectGpu() {
  GpuInfo info;
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return info;
  auto init = reinterpret_cast<InitFn>(dlsym(lib, "nvmlInit_v2"));
  auto count = reinterpret_cast<CountFn>(dlsym(lib, "nvmlDeviceGetCount_v2"));
  auto handle = reinterpret_cast<HandleFn>(dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"));
  auto name = reinterpret_cast<NameFn>(dlsym(lib, "nvmlDeviceGetName"));
  auto mem = reinterpret_cast<MemFn>(dlsym(lib, "nvmlDeviceGetMemoryInfo"));
  auto shutdown = reinterpret_cast<ShutdownFn>(dlsym(lib, "nvmlShutdown"));
  unsigned int n = 0;
  void* dev = nullptr;
  char buf[96] = {0};
  NvmlMemory m = {0, 0, 0};
  if (init != nullptr && count != nullptr && handle != nullptr && name != nullptr &&
      mem != nullptr && init() == 0) {
    if (count(&n) == 0 && n > 0 && handle(0, &dev) == 0 && name(dev, buf, sizeof buf - 1) == 0 &&
        mem(dev, &m) == 0) {
      info.name = buf;
      info.vram_mb = int64_t(m.total / (1024 * 1024));
    }
    if (shutdown != nullptr) shutdown();
  }
  dlclose(lib);
  return info;
}

}  // namespace gleaner::agent
