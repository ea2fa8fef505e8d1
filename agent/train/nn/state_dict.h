// Loading a state dict (diffusers/transformers key names) into a libtorch module: the one
// missing/unexpected/mis-shaped check every model of the trainer uses.
//
// Contract: every registered parameter of `model` must have a floating-point tensor of its shape
// in `weights` and every key of `weights` must name a parameter; otherwise InvalidArgument
// "weights: missing keys: a, b, ..." (or "unexpected keys", "shape mismatch for"), listing up to
// 8. On success the values are copied (F16/BF16 converted to the parameter's dtype) and the
// parameters frozen (requires_grad false). Never throws; not thread-safe.
#pragma once

#include <torch/torch.h>

#include "agent/train/nn/torch_io.h"

namespace gleaner::train {

Status LoadModuleWeights(torch::nn::Module& model, const TensorMap& weights);

}  // namespace gleaner::train
