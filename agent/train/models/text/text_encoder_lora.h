// LoRA on a CLIP text encoder: adapters on q_proj, k_proj, v_proj and out_proj of every layer,
// named by the encoder's role in its pipeline (see nn/lora_adapters.h for the key table):
//
//   role     PEFT prefix      kohya prefix   example key
//   kSd      text_encoder     lora_te lora_te_text_model_encoder_layers_0_self_attn_q_proj.alpha
//   kSdxl1   text_encoder     lora_te1
//   text_encoder.text_model.encoder.layers.0.self_attn.q_proj.lora_A.weight kSdxl2   text_encoder_2
//   lora_te2       lora_te2_text_model_encoder_layers_0_self_attn_v_proj.lora_up.weight
//
// Contract: the returned LoraAdapters point into `model`, which must outlive them.
#pragma once

#include "agent/train/models/text/clip_text_model.h"
#include "agent/train/nn/lora_adapters.h"

namespace gleaner::train::text {

enum class TextEncoderRole {
  kSd,     // SD 1.x / 2.x: the one text encoder
  kSdxl1,  // SDXL text_encoder (CLIPTextModel)
  kSdxl2,  // SDXL text_encoder_2 (CLIPTextModelWithProjection)
};

LoraPrefixes TextEncoderLoraPrefixes(TextEncoderRole role);
LoraAdapters TextEncoderLora(ClipTextModel& model, TextEncoderRole role);

// The role whose keys a LoRA file holds, for a model with or without projection. A file with
// adapters for both SDXL encoders gives text_encoder_2's to the projection model and
// text_encoder's to the other; NotFound when the file has no text-encoder keys.
Result<TextEncoderRole> TextEncoderRoleIn(const TensorMap& file, bool with_projection);

// True for keys of any LoRA component this trainer knows (UNet or text encoders).
bool IsKnownLoraKey(const std::string& key);

}  // namespace gleaner::train::text
