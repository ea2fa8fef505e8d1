// How the UNet's LoRA is named in files: its adapters on the attention projections (to_q, to_k,
// to_v, to_out.0 of every attention), for nn/lora_adapters.h's key table with the prefixes
// {PEFT "unet", kohya "lora_unet"}:
//   PEFT/diffusers: "unet.<module>.lora_A.weight" (A), "unet.<module>.lora_B.weight" (B);
//   kohya:          "lora_unet_<path, '.'->'_'>.lora_down.weight" (A), ".lora_up.weight" (B),
//                   ".alpha" (F32 scalar; scale = alpha / rank), where <path> is what kohya's
//                   sd-scripts writes: the diffusers module path for SD 1.x/2.x, the LDM path
//                   (input_blocks / middle_block / output_blocks, ldm_names.h) for SDXL.
// Files are written with sd-scripts' paths; for SDXL, kohya files of either path flavour are read.
// The UNet's Denoiser::LoraAdaptersFor (unet.h) is UnetLoraAdapters; DenoiserLora
// (denoiser/denoiser_lora.h) attaches, reads and writes them.
//
// Contract: the adapters refer to the UNet's layers, which must outlive them. Not thread-safe.
#pragma once

#include <string>

#include "agent/train/models/unet/unet_config.h"
#include "agent/train/nn/lora_adapters.h"
#include "agent/train/nn/torch_io.h"

namespace gleaner::train::unet {

class UNet;

// The UNet's adapters (not yet attached), named for writing (file == nullptr) or for reading
// `file`.
LoraAdapters UnetLoraAdapters(UNet& unet, const TensorMap* file);

// "lora_unet_..." for a LoRA target module of a UNet of config c (see above); "" when the module
// has no LDM path.
std::string KohyaLoraPrefix(const UNetConfig& c, const std::string& module);

}  // namespace gleaner::train::unet
