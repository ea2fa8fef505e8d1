// Loading a state dict into a libtorch module by parameter name: the rule every model of the
// trainer follows for base weights.
//
// Contract: every parameter of `model` must be in `weights` with its shape and a floating dtype
// (F32/F16/BF16 are converted to the parameter's dtype); a missing, unexpected or mis-shaped key
// is an InvalidArgument that lists them (up to 8, then a count), prefixed with `what`. Keys in
// `ignored` (e.g. transformers' `position_ids` buffer) are skipped. On success the parameters
// hold the weights and are frozen (requires_grad false). Never throws.
#pragma once

#include <torch/torch.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "agent/train/nn/torch_io.h"

namespace gleaner::train {

Status LoadModuleWeights(torch::nn::Module& model, const TensorMap& weights,
                         const std::string& what, const std::set<std::string>& ignored = {});

// The key check both loaders run first, on its own: every key of `shapes` in `weights` with that
// shape and a float dtype, nothing unexpected (keys in `ignored` skipped). For a loader that
// checks a file against the shapes a config implies before it builds (allocates) the model.
Status CheckWeightShapes(const std::map<std::string, std::vector<int64_t>>& shapes,
                         const TensorMap& weights, const std::string& what,
                         const std::set<std::string>& ignored = {});

// Where a model built without parameter storage keeps its weights, and the shape each parameter
// will have (by state-dict key).
struct HollowLayout {
  std::map<std::string, std::vector<int64_t>> shapes;
  torch::Device device = torch::kCPU;
  torch::Dtype dtype = torch::kFloat32;
  // Keys stored in float8_e4m3fn instead of `dtype` (torch_compat.h: libtorch 2.1 or newer).
  std::set<std::string> fp8_keys;
};

// The same rule for a model built "hollow" (parameters without storage, so that a large model
// never exists twice): shapes are checked against `layout`, and each weight is converted to the
// layout's dtype and device one tensor at a time and becomes the parameter's data, sharing
// storage with `weights` where no conversion is needed (do not modify them in place afterwards).
Status LoadHollowModuleWeights(torch::nn::Module& model, const HollowLayout& layout,
                               const TensorMap& weights, const std::string& what);

}  // namespace gleaner::train
