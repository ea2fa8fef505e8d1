#include "agent/train/models/text/text_encoder_lora.h"

namespace gleaner::train::text {

LoraPrefixes TextEncoderLoraPrefixes(TextEncoderRole role) {
  switch (role) {
    case TextEncoderRole::kSd:
      return {"text_encoder", "lora_te"};
    case TextEncoderRole::kSdxl1:
      return {"text_encoder", "lora_te1"};
    case TextEncoderRole::kSdxl2:
      return {"text_encoder_2", "lora_te2"};
  }
  return {};
}

LoraAdapters TextEncoderLora(ClipTextModel& model, TextEncoderRole role) {
  return LoraAdapters(TextEncoderLoraPrefixes(role), model.LoraTargets());
}

Result<TextEncoderRole> TextEncoderRoleIn(const TensorMap& file, bool with_projection) {
  auto has = [&](TextEncoderRole role, LoraFormat format) {
    Result<LoraFormat> f = LoraAdapters(TextEncoderLoraPrefixes(role), {}).FormatIn(file);
    return f.ok() && *f == format;
  };
  bool second = has(TextEncoderRole::kSdxl2, LoraFormat::kPeft) ||
                has(TextEncoderRole::kSdxl2, LoraFormat::kKohya);
  if (second && with_projection) return TextEncoderRole::kSdxl2;
  if (has(TextEncoderRole::kSdxl1, LoraFormat::kKohya)) return TextEncoderRole::kSdxl1;
  if (has(TextEncoderRole::kSd, LoraFormat::kKohya) ||
      has(TextEncoderRole::kSd, LoraFormat::kPeft)) {
    return TextEncoderRole::kSd;
  }
  if (second) return TextEncoderRole::kSdxl2;
  return Status::NotFound(
      "LoRA: no text-encoder keys (text_encoder.*, text_encoder_2.*, lora_te_*, lora_te1_*, "
      "lora_te2_*)");
}

bool IsKnownLoraKey(const std::string& key) {
  for (const char* start : {"unet.", "lora_unet_", "text_encoder.", "text_encoder_2.", "lora_te_",
                            "lora_te1_", "lora_te2_"}) {
    if (key.rfind(start, 0) == 0) return true;
  }
  return false;
}

}  // namespace gleaner::train::text
