// The LoRA adapters of one model component (UNet, text encoder, ...) on its LoraLinear targets,
// and the one naming table for LoRA files, used for reading and for writing.
//
// A component has two key prefixes, e.g. {peft "text_encoder", kohya "lora_te"}. For the module
// path M of a target (its state-dict path, "text_model.encoder.layers.0.self_attn.q_proj"):
//   PEFT/diffusers: "<peft>.M.lora_A.weight" (A [r,in]), "<peft>.M.lora_B.weight" (B [out,r]);
//                   alpha from the file's metadata "alpha" (default: alpha = rank).
//   kohya:          "<kohya>_<K with '.' -> '_'>.lora_down.weight" (A), ".lora_up.weight" (B),
//                   ".alpha" (F32 scalar; default: alpha = rank), where K is M unless the
//                   component gives its targets other kohya paths (the SDXL UNet: the LDM
//                   paths sd-scripts writes, models/unet/ldm_names.h).
// y = W x + b + (alpha / r) B (A x); all targets share one rank and one alpha.
// A component whose kohya layout fuses several targets into one layer (FLUX's qkv) names those
// fused layers (KohyaFused): such a layer is written as one adapter, down = the parts' A stacked
// [n*r, in], up = their B block-diagonal [sum of rows, n*r] (zero rows for parts that are not
// targets), alpha * n (so alpha / rank is unchanged), and read back split: exactly (rank r,
// alpha / n) when up is block-diagonal like that, else each part gets the whole down and its
// rows of up.
//
// Contract: adapters are fp32 tensors requiring grad, attached to (not owned by) the targets'
// LoraLinearImpl, which must outlive this object. Reading a file takes only this component's keys
// (those starting with its prefix) and fails naming any missing, unexpected or mis-shaped one;
// keys of other components are left for their owners (the consumed keys are reported).
// Not thread-safe.
#pragma once

#include <torch/torch.h>

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "agent/train/nn/lora_linear.h"
#include "agent/train/nn/torch_io.h"

namespace gleaner::train {

enum class LoraFormat { kPeft, kKohya };
enum class LoraPart { kA, kB, kAlpha };  // kAlpha: kohya only

struct LoraPrefixes {
  std::string peft;   // "unet", "text_encoder", "text_encoder_2"
  std::string kohya;  // "lora_unet", "lora_te", "lora_te1", "lora_te2"
};

// The file key of one LoRA tensor (see the table above).
std::string LoraKey(LoraFormat format, const LoraPrefixes& prefixes, const std::string& module,
                    LoraPart part);

// One fused kohya layer (see above): its path K and, per part in output-row order, the part's
// output rows and its target index (-1: not a target).
struct KohyaFused {
  std::string path;
  std::vector<int64_t> rows;
  std::vector<int> targets;
};

class LoraAdapters {
 public:
  using Targets = std::vector<std::pair<std::string, LoraLinearImpl*>>;  // module path, layer

  LoraAdapters() = default;
  // kohya_paths: the kohya path K of each target, in target order; empty: K = M for all.
  // fused: the kohya layers that fuse targets (their targets' kohya_paths entries are unused).
  LoraAdapters(LoraPrefixes prefixes, Targets targets, std::vector<std::string> kohya_paths = {},
               std::vector<KohyaFused> fused = {});

  // Fresh adapters: A ~ N(0, (1/r)^2) drawn from gen in target order, B = 0.
  Status Attach(int64_t rank, double alpha, torch::Generator gen);
  // Which naming this component's keys use in `file`: NotFound when it has none of them,
  // InvalidArgument when it has both.
  Result<LoraFormat> FormatIn(const TensorMap& file) const;
  // Attaches the adapters stored in `file` (format from FormatIn); `metadata` is the file's
  // safetensors metadata (PEFT alpha). Adds the keys it consumed to *used.
  Status Read(const TensorMap& file, const std::map<std::string, std::string>& metadata,
              std::set<std::string>* used);

  // A then B of each target, in target order (the optimizer's parameter order).
  std::vector<torch::Tensor> Parameters() const;
  TensorMap Tensors(LoraFormat format) const;    // kohya adds the .alpha scalars
  TensorMap Gradients(LoraFormat format) const;  // zeros where no gradient flowed
  int64_t rank() const { return rank_; }
  double alpha() const { return alpha_; }
  size_t size() const { return targets_.size(); }
  const LoraPrefixes& prefixes() const { return prefixes_; }

 private:
  void Set(LoraLinearImpl* m, const torch::Tensor& a, const torch::Tensor& b);
  // The file key of target i's tensor `part` in `format`.
  std::string Key(size_t i, LoraFormat format, LoraPart part) const;

  // Per target: the (A, B, alpha) a file holds for it and the keys that gave them.
  struct FileAdapter {
    torch::Tensor a, b;
    double alpha = 0;
    std::vector<std::string> keys;
  };
  Status ReadTarget(size_t i, const TensorMap& file, LoraFormat format, FileAdapter* out) const;
  Status ReadFused(const KohyaFused& f, const TensorMap& file, std::vector<FileAdapter>* out) const;
  bool IsFused(size_t i) const;

  LoraPrefixes prefixes_;
  Targets targets_;
  std::vector<std::string> kohya_paths_;
  std::vector<KohyaFused> fused_;
  int64_t rank_ = 0;
  double alpha_ = 0;
};

}  // namespace gleaner::train
