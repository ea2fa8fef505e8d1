#include "agent/train/nn/lora_linear.h"

#include <cmath>

#include "agent/train/nn/torch_compat.h"

namespace gleaner::train {

using torch::Tensor;

LoraLinearImpl::LoraLinearImpl(int64_t in, int64_t out, bool has_bias)
    : in_features(in), out_features(out) {
  weight = register_parameter("weight", torch::empty({out, in}));
  if (has_bias) bias = register_parameter("bias", torch::zeros({out}));
  torch::nn::init::kaiming_uniform_(weight, std::sqrt(5.0));
}

Tensor BaseLinear(const Tensor& x, const Tensor& w, const Tensor& b) {
  if (!IsFp8(w)) return torch::linear(x, w, b);
  return torch::linear(x, w.to(x.scalar_type()), b);
}

Tensor LoraLinearImpl::forward(const Tensor& x) {
  Tensor y = BaseLinear(x, weight, bias);
  if (lora_a.defined()) {
    Tensor a = lora_a, b = lora_b;
    if (x.scalar_type() != a.scalar_type()) {  // autocast: LoRA weights stay fp32
      a = a.to(x.scalar_type());
      b = b.to(x.scalar_type());
    }
    y = y + torch::linear(torch::linear(x, a), b) * lora_scale;
  }
  return y;
}

}  // namespace gleaner::train
