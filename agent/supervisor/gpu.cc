#include "agent/supervisor/gpu.h"

#include <dlfcn.h>

#include <cstdlib>

namespace gleaner::agent {
namespace {

struct NvmlMemory {
  unsigned long long total, free, used;
};

template <typename F>
F Sym(void* lib, const char* name) {
  return reinterpret_cast<F>(dlsym(lib, name));
}

}  // namespace

struct Nvml::Fns {
  int (*init)();
  int (*shutdown)();
  int (*count)(unsigned int*);
  int (*by_index)(unsigned int, void**);
  int (*by_uuid)(const char*, void**);
  int (*name)(void*, char*, unsigned int);
  int (*memory)(void*, NvmlMemory*);
  int (*temperature)(void*, int, unsigned int*);
};

Nvml::Nvml() {
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return;
  Fns f;
  f.init = Sym<decltype(f.init)>(lib, "nvmlInit_v2");
  f.shutdown = Sym<decltype(f.shutdown)>(lib, "nvmlShutdown");
  f.count = Sym<decltype(f.count)>(lib, "nvmlDeviceGetCount_v2");
  f.by_index = Sym<decltype(f.by_index)>(lib, "nvmlDeviceGetHandleByIndex_v2");
  f.by_uuid = Sym<decltype(f.by_uuid)>(lib, "nvmlDeviceGetHandleByUUID");
  f.name = Sym<decltype(f.name)>(lib, "nvmlDeviceGetName");
  f.memory = Sym<decltype(f.memory)>(lib, "nvmlDeviceGetMemoryInfo");
  f.temperature = Sym<decltype(f.temperature)>(lib, "nvmlDeviceGetTemperature");
  if (f.init == nullptr || f.shutdown == nullptr || f.count == nullptr || f.by_index == nullptr ||
      f.by_uuid == nullptr || f.name == nullptr || f.memory == nullptr ||
      f.temperature == nullptr || f.init() != 0) {
    dlclose(lib);
    return;
  }
  lib_ = lib;
  fn_ = new Fns(f);
}

Nvml::~Nvml() {
  if (lib_ == nullptr) return;
  fn_->shutdown();
  delete fn_;
  dlclose(lib_);
}

std::vector<void*> Nvml::Devices(const std::vector<std::string>& selection) {
  std::vector<void*> out;
  if (lib_ == nullptr) return out;
  void* dev = nullptr;
  if (selection.empty()) {
    unsigned int n = 0;
    if (fn_->count(&n) != 0) return out;
    for (unsigned int i = 0; i < n; ++i) {
      if (fn_->by_index(i, &dev) == 0) out.push_back(dev);
    }
    return out;
  }
  for (const std::string& g : selection) {
    bool uuid = g.rfind("GPU-", 0) == 0 || g.rfind("MIG-", 0) == 0;
    int rc = uuid ? fn_->by_uuid(g.c_str(), &dev)
                  : fn_->by_index(unsigned(std::strtoul(g.c_str(), nullptr, 10)), &dev);
    if (rc == 0) out.push_back(dev);
  }
  return out;
}

GpuInfo Nvml::First(const std::vector<std::string>& selection) {
  GpuInfo info;
  std::vector<void*> devs = Devices(selection);
  char buf[96] = {0};
  NvmlMemory m = {0, 0, 0};
  if (!devs.empty() && fn_->name(devs[0], buf, sizeof buf - 1) == 0 &&
      fn_->memory(devs[0], &m) == 0) {
    info.name = buf;
    info.vram_mb = int64_t(m.total / (1024 * 1024));
  }
  return info;
}

std::optional<double> Nvml::MaxTemperatureC(const std::vector<std::string>& selection) {
  std::optional<double> hottest;
  for (void* dev : Devices(selection)) {
    unsigned int t = 0;
    if (fn_->temperature(dev, /*NVML_TEMPERATURE_GPU=*/0, &t) == 0) {
      if (!hottest || double(t) > *hottest) hottest = double(t);
    }
  }
  return hottest;
}

GpuInfo DetectGpu(const std::vector<std::string>& selection) {
  Nvml nvml;
  return nvml.First(selection);
}

}  // namespace gleaner::agent
