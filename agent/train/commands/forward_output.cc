#include "agent/train/commands/forward_output.h"

#include <cstdio>
#include <map>

#include "agent/train/nn/torch_io.h"

namespace gleaner::train {

Status WriteForwardOutput(const torch::Tensor& y, const torch::Tensor& r, const DenoiserLora& lora,
                          const std::string& out_path) {
  std::map<std::string, std::string> meta;
  TensorMap out;
  if (r.defined()) {
    if (r.sizes() != y.sizes()) return Status::Invalid("R must have the output's shape");
    torch::Tensor loss = (y * r.to(y.device(), torch::kFloat32)).sum();
    loss.backward();
    out = lora.PeftGradients();
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.9g", loss.item<double>());
    meta["loss_value"] = buf;
  }
  out["sample"] = y.detach();
  for (auto& [name, tensor] : out) tensor = tensor.to(torch::kCPU, torch::kFloat32);
  return SaveSafetensors(out_path, out, meta);
}

}  // namespace gleaner::train
