// Where a model's frozen base weights live and in which dtype, and the dtype its forward pass
// autocasts to: one rule for every model of the trainer (denoisers, and the samplers that run
// them), from the device and the job's params.mixed_precision.
//
// Contract: pure functions of their arguments; no libtorch state is touched. Mixed precision
// keeps the base in the compute dtype (bf16/fp16; halves its memory) while LoRA weights and
// optimizer state stay fp32, as diffusers' LoRA scripts do.
#pragma once

#include <torch/torch.h>

#include <optional>
#include <string>

namespace gleaner::train {

struct BasePlacement {
  torch::Device device = torch::kCPU;
  torch::Dtype dtype = torch::kFloat32;
  // params.base_precision "fp8": every Linear weight is stored in float8_e4m3fn and upcast per
  // layer when it runs (nn/lora_linear.h's BaseLinear); biases, convolutions and norms stay in
  // `dtype`. Needs libtorch 2.1 (nn/torch_compat.h: kHasFp8).
  bool fp8_linear = false;
};

// The placement for a run on `device` with params.mixed_precision ("no", "bf16", "fp16"): the
// base in bf16 on any device (CPU runs bf16 through CPU autocast), in fp16 on CUDA only (CPU
// autocast has no fp16; such a run is fp32, see AutocastDtypeFor).
BasePlacement PlacementFor(const torch::Device& device, const std::string& mixed_precision);

// The dtype a training or sampling forward pass autocasts to on `device` for
// params.mixed_precision, or nullopt for fp32 (mixed_precision "no", or fp16 on CPU).
std::optional<torch::Dtype> AutocastDtypeFor(const torch::Device& device,
                                             const std::string& mixed_precision);

}  // namespace gleaner::train
