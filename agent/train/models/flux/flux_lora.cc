#include "agent/train/models/flux/flux_lora.h"

#include <map>
#include <set>

#include "agent/train/models/flux/flux_denoiser.h"
#include "agent/train/models/flux/flux_single_file.h"

namespace gleaner::train::flux {
namespace {

const LoraPrefixes kFluxPrefixes{"transformer", "lora_unet"};

bool EndsWith(const std::string& s, const std::string& end) {
  return s.size() >= end.size() && s.compare(s.size() - end.size(), end.size(), end) == 0;
}

}  // namespace

const std::vector<std::string>& DiffusersLoraTargetSuffixes() {
  static const std::vector<std::string> k = {"attn.to_k",
                                             "attn.to_q",
                                             "attn.to_v",
                                             "attn.to_out.0",
                                             "attn.add_k_proj",
                                             "attn.add_q_proj",
                                             "attn.add_v_proj",
                                             "attn.to_add_out",
                                             "ff.net.0.proj",
                                             "ff.net.2",
                                             "ff_context.net.0.proj",
                                             "ff_context.net.2"};
  return k;
}

bool IsDefaultLoraTarget(const std::string& module) {
  for (const std::string& s : DiffusersLoraTargetSuffixes()) {
    if (EndsWith(module, "." + s)) return true;
  }
  return false;
}

namespace {

// The kohya key start of a single-file module ("lora_unet_double_blocks_0_img_attn_qkv").
std::string KohyaStem(const std::string& bfl_module) {
  std::string key = LoraKey(LoraFormat::kKohya, kFluxPrefixes, bfl_module, LoraPart::kAlpha);
  return key.substr(0, key.size() - std::string(".alpha").size());
}

// The block Linears a kohya file adapts: every part of a module it names, except the parts of a
// fused module whose rows of lora_up are all zero (not adapted when written).
std::set<std::string> KohyaFileTargets(const FluxConfig& c, const TensorMap& file) {
  std::set<std::string> out;
  const int64_t inner = c.inner_dim();
  for (const BflModule& m : FluxBlockModules(c)) {
    auto up = file.find(KohyaStem(m.bfl) + ".lora_up.weight");
    if (up == file.end()) continue;
    if (m.diffusers.size() == 1 || up->second.dim() != 2) {
      out.insert(m.diffusers.begin(), m.diffusers.end());
      continue;
    }
    std::set<std::string> live;
    for (size_t j = 0; j < m.diffusers.size(); ++j) {
      int64_t rows = j < 3 ? inner : up->second.size(0) - 3 * inner;
      if (rows <= 0 || int64_t(j) * inner + rows > up->second.size(0)) continue;
      if (up->second.narrow(0, int64_t(j) * inner, rows).abs().max().item<double>() != 0) {
        live.insert(m.diffusers[j]);
      }
    }
    if (live.empty()) live.insert(m.diffusers.begin(), m.diffusers.end());
    out.insert(live.begin(), live.end());
  }
  return out;
}

}  // namespace

LoraAdapters FluxLoraAdapters(FluxTransformer& net, FluxLoraTargets targets,
                              const TensorMap* file) {
  const FluxConfig& c = net.config();
  LoraAdapters::Targets all = net.BlockLinears(), chosen;
  bool from_file = false;
  if (file != nullptr) {
    std::set<std::string> kohya = KohyaFileTargets(c, *file);
    for (const auto& t : all) {
      if (file->count(LoraKey(LoraFormat::kPeft, kFluxPrefixes, t.first, LoraPart::kA)) ||
          kohya.count(t.first)) {
        chosen.push_back(t);
      }
    }
    from_file = !chosen.empty();
  }
  if (!from_file) {
    chosen.clear();
    for (const auto& t : all) {
      if (targets == FluxLoraTargets::kAll || IsDefaultLoraTarget(t.first)) chosen.push_back(t);
    }
  }
  // kohya paths: the single-file module of each target; fused modules become KohyaFused.
  std::map<std::string, int> index;
  for (size_t i = 0; i < chosen.size(); ++i) index[chosen[i].first] = int(i);
  std::map<std::string, LoraLinearImpl*> layers(all.begin(), all.end());
  std::vector<std::string> kohya_paths(chosen.size());
  std::vector<KohyaFused> fused;
  for (const BflModule& m : FluxBlockModules(c)) {
    if (m.diffusers.size() == 1) {
      auto it = index.find(m.diffusers[0]);
      if (it != index.end()) kohya_paths[size_t(it->second)] = m.bfl;
      continue;
    }
    KohyaFused f{m.bfl, {}, {}};
    bool any = false;
    for (const std::string& d : m.diffusers) {
      f.rows.push_back(layers.at(d)->out_features);
      auto it = index.find(d);
      f.targets.push_back(it == index.end() ? -1 : it->second);
      any = any || it != index.end();
    }
    if (any) fused.push_back(std::move(f));
  }
  return LoraAdapters(kFluxPrefixes, std::move(chosen), std::move(kohya_paths), std::move(fused));
}

std::map<std::string, std::string> FluxLoraMetadata(const FluxConfig& c, FluxLoraTargets targets) {
  std::string modules;
  for (const std::string& s : DiffusersLoraTargetSuffixes()) {
    modules += (modules.empty() ? "" : ",") + s;
  }
  if (targets == FluxLoraTargets::kAll) {
    modules += ",norm1.linear,norm1_context.linear,norm.linear,proj_mlp,proj_out";
  }
  return {
      {"target_modules", modules},
      {"ss_base_model_version", "flux1"},
      {"modelspec.architecture", c.guidance_embeds ? "flux-1-dev/lora" : "flux-1-schnell/lora"}};
}

}  // namespace gleaner::train::flux
