// LoRA adapters on the UNet's attention projections, and their file formats: the UNet's use of
// nn/lora_adapters.h (which holds the key table) with prefixes {PEFT "unet", kohya "lora_unet"}.
//
// Contract: Attach puts A [r,in] ~ N(0, (1/r)^2) and B [out,r] = 0 (fp32, requires grad) on every
// LoRA target of the UNet, with scale alpha/r; the base stays frozen. Two file namings:
//   PEFT/diffusers: "unet.<module>.lora_A.weight" (A), "unet.<module>.lora_B.weight" (B);
//   kohya:          "lora_unet_<path, '.'->'_'>.lora_down.weight" (A), ".lora_up.weight" (B),
//                   ".alpha" (F32 scalar; scale = alpha / rank), where <path> is what kohya's
//                   sd-scripts writes: the diffusers module path for SD 1.x/2.x, the LDM path
//                   (input_blocks / middle_block / output_blocks, ldm_names.h) for SDXL.
// Load accepts either naming (for SDXL, kohya keys of either path flavour) and fails naming any
// missing or unknown key. Not thread-safe.
#pragma once

#include <torch/torch.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "agent/train/lora_sd/unet.h"
#include "agent/train/nn/lora_adapters.h"
#include "agent/train/nn/torch_io.h"

namespace gleaner::train::lora_sd {

class Lora {
 public:
  // Attaches fresh adapters (A gaussian from `gen`, B zero).
  static Result<Lora> Attach(UNet& unet, int64_t rank, double alpha, torch::Generator gen);
  // Attaches adapters read from a PEFT or kohya safetensors file (scale from the kohya .alpha,
  // else PEFT metadata "alpha", else 1).
  static Result<Lora> Load(UNet& unet, const std::string& path);
  // Attaches the UNet adapters of a file already read (its other keys are left alone; the keys
  // used are added to *used).
  static Result<Lora> Read(UNet& unet, const TensorMap& file,
                           const std::map<std::string, std::string>& metadata,
                           std::set<std::string>* used);

  // Overwrites the attached adapters' values from PEFT-named tensors (same rank/shapes).
  Status Assign(const TensorMap& peft_tensors);
  // Trainable tensors in a fixed order (A then B of each target, targets in module order).
  std::vector<torch::Tensor> Parameters() const { return adapters_.Parameters(); }
  TensorMap PeftTensors() const { return adapters_.Tensors(LoraFormat::kPeft); }
  TensorMap KohyaTensors() const { return adapters_.Tensors(LoraFormat::kKohya); }
  // Gradients keyed like PeftTensors (zeros where a gradient is undefined).
  TensorMap PeftGradients() const { return adapters_.Gradients(LoraFormat::kPeft); }
  int64_t rank() const { return adapters_.rank(); }
  double alpha() const { return adapters_.alpha(); }
  size_t size() const { return adapters_.size(); }

  // "lora_unet_..." for a LoRA target module of a UNet of config c (see above).
  static std::string KohyaPrefix(const UNetConfig& c, const std::string& module);

 private:
  // The UNet's adapters, kohya-named with LDM paths (SDXL) or diffusers paths.
  static LoraAdapters Adapters(UNet& unet, bool ldm_kohya_paths);

  LoraAdapters adapters_;
};

}  // namespace gleaner::train::lora_sd
