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

#include <set>
#include <string>

#include "agent/train/nn/torch_io.h"

namespace gleaner::train {

Status LoadModuleWeights(torch::nn::Module& model, const TensorMap& weights,
                         const std::string& what, const std::set<std::string>& ignored = {});

}  // namespace gleaner::train
