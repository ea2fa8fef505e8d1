#include "agent/train/denoiser/denoiser_lora.h"

#include <map>
#include <set>

namespace gleaner::train {

Result<DenoiserLora> DenoiserLora::Attach(Denoiser& denoiser, int64_t rank, double alpha,
                                          torch::Generator gen) {
  DenoiserLora l;
  l.adapters_ = denoiser.LoraAdaptersFor();
  GLEANER_RETURN_IF_ERROR(l.adapters_.Attach(rank, alpha, gen));
  return l;
}

Result<DenoiserLora> DenoiserLora::Load(Denoiser& denoiser, const std::string& path) {
  std::map<std::string, std::string> meta;
  Result<TensorMap> file = LoadSafetensors(path, &meta);
  if (!file.ok()) return file.status();
  std::set<std::string> used;
  Result<DenoiserLora> l = Read(denoiser, *file, meta, &used);
  if (!l.ok()) return Status(l.status().code(), path + ": " + l.status().message());
  for (const auto& [key, value] : *file) {
    if (!used.count(key)) return Status::Invalid(path + ": LoRA: unexpected key " + key);
  }
  return l;
}

Result<DenoiserLora> DenoiserLora::Read(Denoiser& denoiser, const TensorMap& file,
                                        const std::map<std::string, std::string>& meta,
                                        std::set<std::string>* used) {
  DenoiserLora l;
  l.adapters_ = denoiser.LoraAdaptersFor(&file);
  GLEANER_RETURN_IF_ERROR(l.adapters_.Read(file, meta, used));
  return l;
}

Status DenoiserLora::Assign(const TensorMap& peft) {
  // PeftTensors() are detached views of the adapters: writing them writes the adapters.
  TensorMap mine = PeftTensors();
  if (peft.size() != mine.size()) {
    return Status::Invalid("LoRA: expected " + std::to_string(mine.size()) + " tensors");
  }
  return CatchTorch("assigning LoRA", [&]() -> Status {
    torch::NoGradGuard no_grad;
    for (auto& [key, t] : mine) {
      auto it = peft.find(key);
      if (it == peft.end() || it->second.sizes() != t.sizes()) {
        return Status::Invalid("LoRA: missing or mis-shaped tensor " + key);
      }
      t.copy_(it->second);
    }
    return Status::Ok();
  });
}

}  // namespace gleaner::train
