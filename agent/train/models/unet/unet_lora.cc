#include "agent/train/models/unet/unet_lora.h"

#include <vector>

#include "agent/train/models/unet/ldm_names.h"
#include "agent/train/models/unet/unet.h"

namespace gleaner::train::unet {
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

std::string KohyaLoraPrefix(const UNetConfig& c, const std::string& module) {
  std::string path = c.has_text_time() ? DiffusersToLdm(LdmModuleTable(c), module) : module;
  if (path.empty()) return "";
  std::string key = LoraKey(LoraFormat::kKohya, kUnetPrefixes, path, LoraPart::kAlpha);
  return key.substr(0, key.size() - std::string(".alpha").size());
}

LoraAdapters UnetLoraAdapters(UNet& unet, const TensorMap* file) {
  // SDXL's kohya files use LDM paths, unless a file being read uses diffusers paths.
  const bool ldm_kohya_paths =
      unet.config().has_text_time() && (file == nullptr || !HasDiffusersKohyaPaths(*file));
  LoraAdapters::Targets targets = unet.LoraTargets();
  std::vector<std::string> kohya;
  if (ldm_kohya_paths) {
    std::vector<ModulePathPair> table = LdmModuleTable(unet.config());
    for (const auto& [module, layer] : targets) kohya.push_back(DiffusersToLdm(table, module));
  }
  return LoraAdapters(kUnetPrefixes, std::move(targets), std::move(kohya));
}

}  // namespace gleaner::train::unet
