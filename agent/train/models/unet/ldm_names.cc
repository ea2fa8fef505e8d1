#include "agent/train/models/unet/ldm_names.h"

namespace gleaner::train::unet {
namespace {

// A resnet's sub-modules: diffusers name -> LDM name.
const char* const kResnetParts[][2] = {
    {"norm1", "in_layers.0"},  {"conv1", "in_layers.2"},  {"time_emb_proj", "emb_layers.1"},
    {"norm2", "out_layers.0"}, {"conv2", "out_layers.3"}, {"conv_shortcut", "skip_connection"}};

void AddResnet(std::vector<ModulePathPair>* t, const std::string& diffusers,
               const std::string& ldm) {
  for (const auto& part : kResnetParts) {
    t->push_back({diffusers + "." + part[0], ldm + "." + part[1]});
  }
}

// True if `path` is `prefix` or starts with `prefix` followed by '.'.
bool HasPrefix(const std::string& path, const std::string& prefix) {
  return path.compare(0, prefix.size(), prefix) == 0 &&
         (path.size() == prefix.size() || path[prefix.size()] == '.');
}

std::string Map(const std::vector<ModulePathPair>& table, const std::string& path, bool to_ldm) {
  const ModulePathPair* best = nullptr;
  size_t best_len = 0;
  for (const ModulePathPair& e : table) {
    const std::string& from = to_ldm ? e.diffusers : e.ldm;
    if (from.size() >= best_len && HasPrefix(path, from)) {
      best = &e;
      best_len = from.size();
    }
  }
  if (best == nullptr) return "";
  return (to_ldm ? best->ldm : best->diffusers) + path.substr(best_len);
}

}  // namespace

std::vector<ModulePathPair> LdmModuleTable(const UNetConfig& c) {
  const size_t n = c.block_out_channels.size();
  std::vector<ModulePathPair> t = {{"conv_in", "input_blocks.0.0"},
                                   {"time_embedding.linear_1", "time_embed.0"},
                                   {"time_embedding.linear_2", "time_embed.2"},
                                   {"add_embedding.linear_1", "label_emb.0.0"},
                                   {"add_embedding.linear_2", "label_emb.0.2"},
                                   {"conv_norm_out", "out.0"},
                                   {"conv_out", "out.2"}};
  int k = 1;  // input_blocks index
  for (size_t i = 0; i < n; ++i) {
    std::string d = "down_blocks." + std::to_string(i);
    for (int j = 0; j < c.layers_per_block[i]; ++j, ++k) {
      std::string in = "input_blocks." + std::to_string(k);
      AddResnet(&t, d + ".resnets." + std::to_string(j), in + ".0");
      if (c.down_block_types[i] == "CrossAttnDownBlock2D") {
        t.push_back({d + ".attentions." + std::to_string(j), in + ".1"});
      }
    }
    if (i + 1 < n) {
      t.push_back({d + ".downsamplers.0.conv", "input_blocks." + std::to_string(k++) + ".0.op"});
    }
  }
  AddResnet(&t, "mid_block.resnets.0", "middle_block.0");
  t.push_back({"mid_block.attentions.0", "middle_block.1"});
  AddResnet(&t, "mid_block.resnets.1", "middle_block.2");
  k = 0;  // output_blocks index
  for (size_t i = 0; i < n; ++i) {
    std::string u = "up_blocks." + std::to_string(i);
    bool attn = c.up_block_types[i] == "CrossAttnUpBlock2D";
    int layers = c.layers_per_block[n - 1 - i] + 1;
    for (int j = 0; j < layers; ++j, ++k) {
      std::string out = "output_blocks." + std::to_string(k);
      AddResnet(&t, u + ".resnets." + std::to_string(j), out + ".0");
      if (attn) t.push_back({u + ".attentions." + std::to_string(j), out + ".1"});
      if (j == layers - 1 && i + 1 < n) {
        t.push_back({u + ".upsamplers.0", out + (attn ? ".2" : ".1")});
      }
    }
  }
  return t;
}

std::string DiffusersToLdm(const std::vector<ModulePathPair>& table, const std::string& path) {
  return Map(table, path, /*to_ldm=*/true);
}

std::string LdmToDiffusers(const std::vector<ModulePathPair>& table, const std::string& path) {
  return Map(table, path, /*to_ldm=*/false);
}

}  // namespace gleaner::train::unet
