// How the FLUX transformer's LoRA is named in files, for nn/lora_adapters.h with the prefixes
// {PEFT "transformer", kohya "lora_unet"}:
//   PEFT/diffusers: "transformer.<module>.lora_A.weight" / ".lora_B.weight" (module: the diffusers
//                   path, "transformer_blocks.0.attn.to_q"), alpha in the metadata; what
//                   FluxPipeline.load_lora_weights reads.
//   kohya:          "lora_unet_<single-file path, '.'->'_'>.lora_down.weight" / ".lora_up.weight"
//                   / ".alpha" over the original layout (double_blocks_0_img_attn_qkv,
//                   single_blocks_0_linear1, ...), as kohya's lora_flux.py and ComfyUI read them:
//                   the q/k/v (and single-block MLP) adapters of a fused layer are written as one
//                   adapter on it (down = the parts' A stacked, up = their B block-diagonal, alpha
//                   times the number of parts so the scale alpha/rank stays the same).
// Reading a kohya file splits a fused adapter back onto its parts: exactly, with the original rank
// and alpha, when it is block-diagonal as written here; otherwise each part gets the whole down
// and its rows of up.
//
// Contract: the adapters refer to the transformer's layers, which must outlive them. Not
// thread-safe.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "agent/train/models/flux/flux_config.h"
#include "agent/train/models/flux/flux_transformer.h"
#include "agent/train/nn/lora_adapters.h"
#include "agent/train/nn/torch_io.h"

namespace gleaner::train::flux {

enum class FluxLoraTargets;

// The diffusers default target suffixes (train_dreambooth_lora_flux.py).
const std::vector<std::string>& DiffusersLoraTargetSuffixes();
// True when a block Linear's module path is a default target.
bool IsDefaultLoraTarget(const std::string& module);

// The transformer's adapters (not yet attached), for writing (file == nullptr: the `targets`
// choice) or for reading `file` (the block Linears the file names).
LoraAdapters FluxLoraAdapters(FluxTransformer& net, FluxLoraTargets targets, const TensorMap* file);
// target_modules, and kohya's ss_base_model_version / modelspec.architecture.
std::map<std::string, std::string> FluxLoraMetadata(const FluxConfig& c, FluxLoraTargets targets);

}  // namespace gleaner::train::flux
