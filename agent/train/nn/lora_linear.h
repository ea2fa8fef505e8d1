// A Linear layer that can carry a LoRA adapter: the one LoRA-capable projection every model of the
// trainer (UNet attention, CLIP text encoders) is built from.
//
// Contract: `weight` [out,in] and `bias` [out] are registered parameters named as torch's Linear,
// so diffusers/transformers state-dict keys load as is. `lora_a` [r,in] and `lora_b` [out,r] are
// NOT registered (the base state dict stays the base model's); they are attached by the LoRA
// owner (denoiser/denoiser_lora.h, models/text/text_encoder_lora.h) and stay fp32 under autocast.
// Not thread-safe.
#pragma once

#include <torch/torch.h>

#include <cstdint>

namespace gleaner::train {

// torch::linear(x, w, b), with a weight stored in fp8 (torch_compat.h) upcast to x's dtype for
// this call only (kohya's --fp8_base): the frozen base of a layer is full width only while the
// layer runs. Under autocast the upcast weight is cast again to the autocast dtype, which is exact
// (every fp8 value is a bf16/fp16 value).
torch::Tensor BaseLinear(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b);
inline torch::Tensor BaseLinear(const torch::nn::Linear& l, const torch::Tensor& x) {
  return BaseLinear(x, l->weight, l->bias);
}

// y = x W^T + b + scale * ((x A^T) B^T) when LoRA is attached.
struct LoraLinearImpl : torch::nn::Module {
  LoraLinearImpl(int64_t in, int64_t out, bool bias);
  torch::Tensor forward(const torch::Tensor& x);
  int64_t in_features, out_features;
  torch::Tensor weight, bias;    // registered parameters (base)
  torch::Tensor lora_a, lora_b;  // not registered; undefined without LoRA
  double lora_scale = 0;
};

}  // namespace gleaner::train
