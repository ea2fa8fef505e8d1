#include "agent/train/nn/state_dict.h"

#include <string>
#include <vector>

namespace gleaner::train {

Status LoadModuleWeights(torch::nn::Module& model, const TensorMap& weights) {
  return CatchTorch("loading weights", [&]() -> Status {
    auto params = model.named_parameters(/*recurse=*/true);
    std::vector<std::string> missing, unexpected, mismatched;
    for (const auto& p : params) {
      if (!weights.count(p.key())) missing.push_back(p.key());
    }
    for (const auto& [k, v] : weights) {
      const torch::Tensor* p = params.find(k);
      if (p == nullptr) {
        unexpected.push_back(k);
      } else if (p->sizes() != v.sizes()) {
        mismatched.push_back(k);
      } else if (!v.is_floating_point()) {
        mismatched.push_back(k + " (not a float tensor)");
      }
    }
    auto list = [](const std::vector<std::string>& v) {
      std::string s;
      for (size_t i = 0; i < v.size() && i < 8; ++i) s += (i ? ", " : "") + v[i];
      if (v.size() > 8) s += ", ... (" + std::to_string(v.size()) + " in all)";
      return s;
    };
    if (!missing.empty()) return Status::Invalid("weights: missing keys: " + list(missing));
    if (!unexpected.empty()) {
      return Status::Invalid("weights: unexpected keys: " + list(unexpected));
    }
    if (!mismatched.empty()) {
      return Status::Invalid("weights: shape mismatch for: " + list(mismatched));
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
