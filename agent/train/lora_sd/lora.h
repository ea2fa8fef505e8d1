// LoRA adapters on the UNet's attention projections, and their file formats.
//
// Contract: Attach puts A [r,in] ~ N(0, (1/r)^2) and B [out,r] = 0 (fp32, requires grad) on every
// LoRA target of the UNet, with scale alpha/r; the base stays frozen. Two file namings:
//   PEFT/diffusers: "unet.<module>.lora_A.weight" (A), "unet.<module>.lora_B.weight" (B);
//   kohya:          "lora_unet_<path, '.'->'_'>.lora_down.weight" (A), ".lora_up.weight" (B),
//                   ".alpha" (F32 scalar; scale = alpha / rank), where <path> is what kohya's
//                   sd-scripts writes: the diffusers module path for SD 1.x/2.x, the LDM path
//                   (input_blocks / middle_block / output_blocks, ldm_names.h) for SDXL.
// Load accepts either naming (and kohya keys of either path flavour) and fails naming any
// missing or unknown key. Not thread-safe.
#pragma once

#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

#include "agent/train/lora_sd/unet.h"
#include "agent/train/nn/torch_io.h"

namespace gleaner::train::lora_sd {

class Lora {
 public:
  // Attaches fresh adapters (A gaussian from `gen`, B zero).
  static Result<Lora> Attach(UNet& unet, int64_t rank, double alpha, torch::Generator gen);
  // Attaches adapters read from a PEFT or kohya safetensors file (scale from the kohya .alpha,
  // else PEFT metadata "alpha"/"rank", else 1).
  static Result<Lora> Load(UNet& unet, const std::string& path);
  // Attaches adapters from PEFT-named tensors (used to restore checkpoints).
  static Result<Lora> FromPeft(UNet& unet, const TensorMap& tensors, int64_t rank, double alpha);

  // Overwrites the attached adapters' values from PEFT-named tensors (same rank/shapes).
  Status Assign(const TensorMap& peft_tensors);
  // Trainable tensors in a fixed order (A then B of each target, targets in module order).
  std::vector<torch::Tensor> Parameters() const;
  TensorMap PeftTensors() const;
  TensorMap KohyaTensors() const;
  // Gradients keyed like PeftTensors (zeros where a gradient is undefined).
  TensorMap PeftGradients() const;
  int64_t rank() const { return rank_; }
  double alpha() const { return alpha_; }
  size_t size() const { return targets_.size(); }

  static std::string PeftPrefix(const std::string& module) { return "unet." + module; }
  // "lora_unet_..." for a LoRA target module of a UNet of config c (see above).
  static std::string KohyaPrefix(const UNetConfig& c, const std::string& module);

 private:
  // Targets with their kohya prefixes, for a UNet of config c.
  void SetTargets(UNet& unet);

  std::vector<std::pair<std::string, LoraLinearImpl*>> targets_;
  std::vector<std::string> kohya_;  // kohya prefix of each target
  int64_t rank_ = 0;
  double alpha_ = 0;
};

}  // namespace gleaner::train::lora_sd
