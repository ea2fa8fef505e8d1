#include "agent/train/nn/placement.h"

namespace gleaner::train {

BasePlacement PlacementFor(const torch::Device& device, const std::string& mixed_precision) {
  BasePlacement p;
  p.device = device;
  std::optional<torch::Dtype> d = AutocastDtypeFor(device, mixed_precision);
  if (d) p.dtype = *d;
  return p;
}

std::optional<torch::Dtype> AutocastDtypeFor(const torch::Device& device,
                                             const std::string& mixed_precision) {
  if (mixed_precision == "bf16") return torch::kBFloat16;
  if (mixed_precision == "fp16" && device.is_cuda()) return torch::kFloat16;
  return std::nullopt;
}

}  // namespace gleaner::train
