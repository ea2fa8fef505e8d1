#include "agent/train/sampling/pipeline_lora.h"

#include <map>
#include <set>

#include "agent/train/denoiser/denoiser_lora.h"
#include "agent/train/models/text/text_encoder_lora.h"

namespace gleaner::train::sampling {

Status AttachLoraFile(const std::string& path, TextToImageModel& m) {
  std::map<std::string, std::string> meta;
  Result<TensorMap> file = LoadSafetensors(path, &meta);
  if (!file.ok()) return file.status();
  auto fail = [&](const Status& s) { return Status::Invalid(path + ": " + s.message()); };
  std::set<std::string> used;
  // A component takes part when the file has keys under its prefixes (FormatIn finds them).
  if (m.denoiser->LoraAdaptersFor(&*file).FormatIn(*file).ok()) {
    Result<DenoiserLora> l = DenoiserLora::Read(*m.denoiser, *file, meta, &used);
    if (!l.ok()) return fail(l.status());
  }
  const bool sdxl = m.encoders.size() == 2;
  for (size_t i = 0; i < m.encoders.size(); ++i) {
    text::TextEncoderRole role = !sdxl    ? text::TextEncoderRole::kSd
                                 : i == 0 ? text::TextEncoderRole::kSdxl1
                                          : text::TextEncoderRole::kSdxl2;
    LoraAdapters adapters = text::TextEncoderLora(*m.encoders[i].model, role);
    if (!adapters.FormatIn(*file).ok()) continue;
    Status s = adapters.Read(*file, meta, &used);
    if (!s.ok()) return fail(s);
  }
  if (used.empty()) return Status::Invalid(path + ": LoRA: no adapter for this model");
  for (const auto& [key, value] : *file) {
    if (!used.count(key)) return Status::Invalid(path + ": LoRA: unexpected key " + key);
  }
  return Status::Ok();
}

}  // namespace gleaner::train::sampling
