#include "agent/train/lora_sd/lora.h"

#include <map>
#include <set>

#include "agent/train/lora_sd/ldm_names.h"

namespace gleaner::train::lora_sd {
namespace {

const LoraPrefixes kUnetPrefixes{"unet", "lora_unet"};

// True when a kohya file names SDXL modules by diffusers paths (some converters write them so).
bool HasDiffusersKohyaPaths(const TensorMap& file) {
  for (const char* start :
       {"lora_unet_down_blocks_", "lora_unet_mid_block_", "lora_unet_up_blocks_"}) {
    for (const auto& [key, value] : file) {
      if (key.rfind(start, 0) == 0) return true;
    }
  }
  return false;
}

}  // namespace

std::string Lora::KohyaPrefix(const UNetConfig& c, const std::string& module) {
  std::string path = c.has_text_time() ? DiffusersToLdm(LdmModuleTable(c), module) : module;
  if (path.empty()) return "";
  std::string key = LoraKey(LoraFormat::kKohya, kUnetPrefixes, path, LoraPart::kAlpha);
  return key.substr(0, key.size() - std::string(".alpha").size());
}

LoraAdapters Lora::Adapters(UNet& unet, bool ldm_kohya_paths) {
  LoraAdapters::Targets targets = unet.LoraTargets();
  std::vector<std::string> kohya;
  if (ldm_kohya_paths) {
    std::vector<ModulePathPair> table = LdmModuleTable(unet.config());
    for (const auto& [module, layer] : targets) kohya.push_back(DiffusersToLdm(table, module));
  }
  return LoraAdapters(kUnetPrefixes, std::move(targets), std::move(kohya));
}

Result<Lora> Lora::Attach(UNet& unet, int64_t rank, double alpha, torch::Generator gen) {
  Lora l;
  l.adapters_ = Adapters(unet, unet.config().has_text_time());
  GLEANER_RETURN_IF_ERROR(l.adapters_.Attach(rank, alpha, gen));
  return l;
}

Result<Lora> Lora::Load(UNet& unet, const std::string& path) {
  std::map<std::string, std::string> meta;
  Result<TensorMap> file = LoadSafetensors(path, &meta);
  if (!file.ok()) return file.status();
  std::set<std::string> used;
  Result<Lora> l = Read(unet, *file, meta, &used);
  if (!l.ok()) return Status(l.status().code(), path + ": " + l.status().message());
  for (const auto& [key, value] : *file) {
    if (!used.count(key)) return Status::Invalid(path + ": LoRA: unexpected key " + key);
  }
  return l;
}

Result<Lora> Lora::Read(UNet& unet, const TensorMap& file,
                        const std::map<std::string, std::string>& meta,
                        std::set<std::string>* used) {
  Lora l;
  l.adapters_ = Adapters(unet, unet.config().has_text_time() && !HasDiffusersKohyaPaths(file));
  GLEANER_RETURN_IF_ERROR(l.adapters_.Read(file, meta, used));
  return l;
}

Status Lora::Assign(const TensorMap& peft) {
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

}  // namespace gleaner::train::lora_sd
