#include "agent/supervisor/repro_class.h"

#include <cstdlib>
#include <sstream>

#include "shared/native/files.h"

namespace gleaner::agent {
namespace {

// "family F model M: <model name>" from /proc/cpuinfo's first processor; "" when unreadable.
std::string CpuFamily() {
  Result<std::string> info = files::ReadAll("/proc/cpuinfo", int64_t(1) << 20);
  if (!info.ok()) return "";
  std::string family, model, name;
  std::istringstream in(*info);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) break;  // the first processor only
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, line.find_last_not_of(" \t", colon - 1) + 1);
    std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    if (key == "cpu family") family = value;
    if (key == "model") model = value;
    if (key == "model name") name = value;
  }
  if (family.empty() && name.empty()) return "";
  std::string out = "family " + family + " model " + model + ": " + name;
  if (out.size() > 128) out.resize(128);
  return out;
}

}  // namespace

Json DetectReproClass(const GpuInfo& gpu, const std::string& trainer_path) {
  Json c = {{"gpu_model", gpu.name.substr(0, 128)}, {"device", gpu.name == "cpu" ? "cpu" : "cuda"}};
  const char* threads = std::getenv("GLEANER_CPU_THREADS");
  int64_t n = threads ? std::atoll(threads) : 1;
  c["threads"] = n > 0 ? n : 1;
  Result<files::FileDigest> bin = files::Digest(trainer_path);
  if (bin.ok()) c["trainer_build"] = bin->sha256.substr(0, 16);
  if (gpu.name == "cpu") {
    std::string family = CpuFamily();
    if (!family.empty()) c["cpu_family"] = family;
  }
  return c;
}

}  // namespace gleaner::agent
