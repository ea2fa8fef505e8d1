#include "agent/train/nn/module_weights.h"

#include <vector>

namespace gleaner::train {
namespace {

std::string List(const std::vector<std::string>& keys) {
  std::string s;
  for (size_t i = 0; i < keys.size() && i < 8; ++i) s += (i ? ", " : "") + keys[i];
  if (keys.size() > 8) s += ", ... (" + std::to_string(keys.size()) + " in all)";
  return s;
}

}  // namespace

Status LoadModuleWeights(torch::nn::Module& model, const TensorMap& weights,
                         const std::string& what, const std::set<std::string>& ignored) {
  return CatchTorch(what.c_str(), [&]() -> Status {
    auto params = model.named_parameters(/*recurse=*/true);
    std::vector<std::string> missing, unexpected, mismatched;
    for (const auto& p : params) {
      if (!weights.count(p.key())) missing.push_back(p.key());
    }
    for (const auto& [key, value] : weights) {
      if (ignored.count(key)) continue;
      const torch::Tensor* p = params.find(key);
      if (p == nullptr) {
        unexpected.push_back(key);
      } else if (p->sizes() != value.sizes()) {
        mismatched.push_back(key);
      } else if (!value.is_floating_point()) {
        mismatched.push_back(key + " (not a float tensor)");
      }
    }
    if (!missing.empty()) return Status::Invalid(what + ": missing keys: " + List(missing));
    if (!unexpected.empty()) {
      return Status::Invalid(what + ": unexpected keys: " + List(unexpected));
    }
    if (!mismatched.empty()) {
      return Status::Invalid(what + ": shape mismatch for: " + List(mismatched));
    }
    torch::NoGradGuard no_grad;
    for (auto& p : params) {
      p.value().copy_(weights.at(p.key()));
      p.value().set_requires_grad(false);
    }
    return Status::Ok();
  });
}

}  // namespace gleaner::train
