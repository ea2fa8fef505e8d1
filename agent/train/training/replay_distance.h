// How far a replayed LoRA is from the one under check: the comparison of verified training
// (docs/architecture.md, "Verified training") for trainer/device pairs that are not bit-exact.
//
// Distance of one tensor: ||a - b||_2 / max(||a||_2, ||b||_2), in float64 (symmetric: neither
// side is trusted more; 0 when both are zero, at most 2). A tensor missing from one side, with
// another shape, or holding NaN/Inf has distance +inf. The result is the worst tensor; the pair
// agrees when that distance is <= the tolerance (tolerance 0: every value equal).
//
// Contract: pure functions over CPU tensors of any floating dtype (compared in float64); they
// never throw (libtorch errors become Status). Errors are for inputs that are not comparable at
// all: an unreadable or malformed file, an empty LoRA, a non-floating tensor.
#pragma once

#include <cstdint>
#include <string>

#include "agent/train/nn/torch_io.h"
#include "shared/status.h"

namespace gleaner::train::training {

struct ReplayDistance {
  std::string worst_tensor;  // name of the tensor with the largest distance
  double worst = 0;          // its distance (+inf: missing, shape differs, not finite)
  std::string reason;        // why worst is +inf ("missing from b", ...), else ""
  double median = 0;         // median over all tensors (for reports)
  int64_t tensors = 0;       // tensors compared (the union of both key sets)
  bool within = false;       // worst <= tolerance
};

// The distance of one pair of tensors (see above); +inf for other shapes or non-finite values.
Result<double> TensorDistance(const torch::Tensor& a, const torch::Tensor& b);

// Compares two LoRAs tensor by tensor (keys matched by name).
Result<ReplayDistance> CompareLora(const TensorMap& a, const TensorMap& b, double tolerance);

// The LoRA of `path`: a .safetensors file as is, or a checkpoint directory (docs/training.md):
// its lora.safetensors and, when present, text_encoder_lora.safetensors, keys prefixed with the
// file name ("lora.safetensors:<key>").
Result<TensorMap> LoadLoraForComparison(const std::string& path);

}  // namespace gleaner::train::training
