#include "agent/train/nn/module_weights.h"

#include "agent/train/nn/torch_compat.h"

namespace gleaner::train {
namespace {

using Shapes = std::map<std::string, std::vector<int64_t>>;

std::string List(const std::vector<std::string>& keys) {
  std::string s;
  for (size_t i = 0; i < keys.size() && i < 8; ++i) s += (i ? ", " : "") + keys[i];
  if (keys.size() > 8) s += ", ... (" + std::to_string(keys.size()) + " in all)";
  return s;
}

// The key check both loaders share: every parameter present, nothing unexpected, shapes and
// float dtypes right.
Status CheckKeys(const Shapes& shapes, const TensorMap& weights, const std::string& what,
                 const std::set<std::string>& ignored) {
  std::vector<std::string> missing, unexpected, mismatched;
  for (const auto& [key, shape] : shapes) {
    if (!weights.count(key)) missing.push_back(key);
  }
  for (const auto& [key, value] : weights) {
    if (ignored.count(key)) continue;
    auto it = shapes.find(key);
    if (it == shapes.end()) {
      unexpected.push_back(key);
    } else if (value.sizes() != torch::IntArrayRef(it->second)) {
      mismatched.push_back(key);
    } else if (!value.is_floating_point()) {
      mismatched.push_back(key + " (not a float tensor)");
    }
  }
  if (!missing.empty()) return Status::Invalid(what + ": missing keys: " + List(missing));
  if (!unexpected.empty()) return Status::Invalid(what + ": unexpected keys: " + List(unexpected));
  if (!mismatched.empty()) {
    return Status::Invalid(what + ": shape mismatch for: " + List(mismatched));
  }
  return Status::Ok();
}

}  // namespace

Status CheckWeightShapes(const Shapes& shapes, const TensorMap& weights, const std::string& what,
                         const std::set<std::string>& ignored) {
  return CheckKeys(shapes, weights, what, ignored);
}

Status LoadModuleWeights(torch::nn::Module& model, const TensorMap& weights,
                         const std::string& what, const std::set<std::string>& ignored) {
  return CatchTorch(what.c_str(), [&]() -> Status {
    auto params = model.named_parameters(/*recurse=*/true);
    Shapes shapes;
    for (const auto& p : params) shapes[p.key()] = p.value().sizes().vec();
    GLEANER_RETURN_IF_ERROR(CheckKeys(shapes, weights, what, ignored));
    torch::NoGradGuard no_grad;
    for (auto& p : params) {
      p.value().copy_(weights.at(p.key()));
      p.value().set_requires_grad(false);
    }
    return Status::Ok();
  });
}

Status LoadHollowModuleWeights(torch::nn::Module& model, const HollowLayout& layout,
                               const TensorMap& weights, const std::string& what) {
  return CatchTorch(what.c_str(), [&]() -> Status {
    GLEANER_RETURN_IF_ERROR(CheckKeys(layout.shapes, weights, what, {}));
    // Tensor by tensor, so at most one converted tensor exists besides the model at a time.
    torch::NoGradGuard no_grad;
    for (auto& p : model.named_parameters(/*recurse=*/true)) {
      p.value().set_requires_grad(false);
      const torch::Tensor& w = weights.at(p.key());
      p.value().set_data(layout.fp8_keys.count(p.key()) ? ToFp8(w, layout.device)
                                                        : w.to(layout.device, layout.dtype));
    }
    return Status::Ok();
  });
}

}  // namespace gleaner::train
