// What `gleaner-train forward` writes, for every denoiser family (forward_main.cc,
// flux_forward.cc): the output as `sample` and, with loss weights R, the LoRA gradients of
// sum(output * R) under their PEFT names, with metadata loss_value; always fp32 on the CPU.
//
// Contract: `y` is the forward output, computed with autograd on when `r` is defined; `lora`
// holds the adapters it ran with. An R of another shape is InvalidArgument; libtorch errors
// propagate to the caller's CatchTorch. Not thread-safe.
#pragma once

#include <torch/torch.h>

#include <string>

#include "agent/train/denoiser/denoiser_lora.h"
#include "shared/status.h"

namespace gleaner::train {

Status WriteForwardOutput(const torch::Tensor& y, const torch::Tensor& r, const DenoiserLora& lora,
                          const std::string& out_path);

}  // namespace gleaner::train
