// The LoRA of a denoiser: adapters on every target the denoiser names (Denoiser::LoraAdaptersFor),
// fresh or read from a LoRA file, in the two file namings of nn/lora_adapters.h (PEFT/diffusers
// and kohya) with the key prefixes and paths the family gives.
//
// Contract: Attach puts A [r,in] ~ N(0, (1/r)^2) and B [out,r] = 0 (fp32, requires grad) on every
// target, with scale alpha/r; the base stays frozen. Load/Read accept either naming (and any
// naming flavour the family reads) and fail naming any missing, unknown or mis-shaped key. The
// adapters are attached to (not owned by) the denoiser's layers: the denoiser must outlive this
// object. Not thread-safe.
#pragma once

#include <torch/torch.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "agent/train/denoiser/denoiser.h"
#include "agent/train/nn/lora_adapters.h"
#include "agent/train/nn/torch_io.h"

namespace gleaner::train {

class DenoiserLora {
 public:
  // Attaches fresh adapters (A gaussian from `gen`, B zero).
  static Result<DenoiserLora> Attach(Denoiser& denoiser, int64_t rank, double alpha,
                                     torch::Generator gen);
  // Attaches adapters read from a PEFT or kohya safetensors file (scale from the kohya .alpha,
  // else PEFT metadata "alpha", else 1). Every key of the file must be the denoiser's.
  static Result<DenoiserLora> Load(Denoiser& denoiser, const std::string& path);
  // Attaches the denoiser's adapters of a file already read (its other keys are left alone;
  // the keys used are added to *used).
  static Result<DenoiserLora> Read(Denoiser& denoiser, const TensorMap& file,
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

 private:
  LoraAdapters adapters_;
};

}  // namespace gleaner::train
