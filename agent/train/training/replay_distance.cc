#include "agent/train/training/replay_distance.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace gleaner::train::training {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

bool IsDirectory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace

Result<double> TensorDistance(const torch::Tensor& a, const torch::Tensor& b) {
  if (!a.is_floating_point() || !b.is_floating_point()) {
    return Status::Invalid("not a floating-point tensor");
  }
  if (a.sizes() != b.sizes()) return kInf;
  double d = 0;
  Status s = CatchTorch("replay distance", [&] {
    torch::Tensor a64 = a.to(torch::kFloat64), b64 = b.to(torch::kFloat64);
    double diff = (a64 - b64).norm().item<double>();
    double scale = std::max(a64.norm().item<double>(), b64.norm().item<double>());
    // NaN anywhere makes a norm NaN, Inf makes it Inf: both are no agreement.
    if (!std::isfinite(diff) || !std::isfinite(scale)) {
      d = kInf;
    } else {
      d = scale == 0 ? 0 : diff / scale;
    }
    return Status::Ok();
  });
  if (!s.ok()) return s;
  return d;
}

Result<ReplayDistance> CompareLora(const TensorMap& a, const TensorMap& b, double tolerance) {
  if (a.empty() || b.empty()) return Status::Invalid("a LoRA without tensors");
  ReplayDistance r;
  std::vector<double> all;
  auto consider = [&](const std::string& name, double d, const char* reason) {
    all.push_back(d);
    if (r.worst_tensor.empty() || d > r.worst) {
      r.worst_tensor = name;
      r.worst = d;
      r.reason = reason;
    }
  };
  for (const auto& [name, ta] : a) {
    auto it = b.find(name);
    if (it == b.end()) {
      consider(name, kInf, "missing from b");
      continue;
    }
    Result<double> d = TensorDistance(ta, it->second);
    if (!d.ok()) return Status::Invalid(name + ": " + d.status().message());
    const char* reason = "";
    if (std::isinf(*d)) reason = ta.sizes() != it->second.sizes() ? "shapes differ" : "not finite";
    consider(name, *d, reason);
  }
  for (const auto& [name, tb] : b) {
    if (a.count(name) == 0) consider(name, kInf, "missing from a");
  }
  std::sort(all.begin(), all.end());
  size_t n = all.size();
  r.median = n % 2 == 1 ? all[n / 2] : (all[n / 2 - 1] + all[n / 2]) / 2;
  r.tensors = int64_t(n);
  r.within = r.worst <= tolerance;
  return r;
}

Result<TensorMap> LoadLoraForComparison(const std::string& path) {
  if (!IsDirectory(path)) return LoadSafetensors(path);
  TensorMap out;
  for (const char* file : {"lora.safetensors", "text_encoder_lora.safetensors"}) {
    std::string p = path + "/" + file;
    // lora.safetensors is in every checkpoint; the text encoders' only when they were trained.
    if (std::string(file) != "lora.safetensors" && !Exists(p)) continue;
    Result<TensorMap> m = LoadSafetensors(p);
    if (!m.ok()) return m.status();
    for (auto& [k, v] : *m) out[std::string(file) + ":" + k] = std::move(v);
  }
  return out;
}

}  // namespace gleaner::train::training
