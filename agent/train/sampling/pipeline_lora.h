// A LoRA file applied to a text-to-image pipeline (text_to_image.h): the denoiser's adapters
// and those of each text encoder, in our own, PEFT/diffusers or kohya naming (nn/lora_adapters.h).
//
//   denoiser:       its family's names (the UNet: unet.* | lora_unet_*, models/unet/unet_lora.h)
//   text encoders:  SD 1.x/2.x text_encoder.* | lora_te_*;  SDXL text_encoder.* | lora_te1_*
//                   and text_encoder_2.* | lora_te2_*     (models/text/text_encoder_lora.h)
//
// Contract: each component whose keys the file has gets its adapters attached (replacing none:
// call it once per model); a component without keys is left as it is. InvalidArgument, prefixed
// with the path, for a key no component takes, a mis-shaped or missing tensor, or a file
// without any adapter. Not thread-safe.
#pragma once

#include <string>

#include "agent/train/sampling/text_to_image.h"

namespace gleaner::train::sampling {

Status AttachLoraFile(const std::string& path, TextToImageModel& model);

}  // namespace gleaner::train::sampling
