// Module paths of a UNet2DConditionModel in diffusers' naming and in the original LDM/SGM naming
// (Stability's code: input_blocks / middle_block / output_blocks), which kohya's sd-scripts uses
// for SDXL LoRA keys and which ComfyUI, Forge/A1111 and diffusers' load_lora_weights map from.
//
// The one table of that correspondence is LdmModuleTable(config): every module whose path
// differs, derived from the block structure (any number of levels, layers per block, attention
// or not), as the LDM UNet numbers its blocks:
//   input_blocks.0.0            conv_in
//   input_blocks.<k>.0 / .1     resnet / attention j of down block i, k counting from 1 over
//                               every layer and every downsampler in order
//   input_blocks.<k>.0.op       downsampler of down block i
//   middle_block.0 / .1 / .2    mid resnet 0 / attention / resnet 1
//   output_blocks.<k>.0 / .1    resnet / attention j of up block i, k counting from 0 over layers
//   output_blocks.<k>.<1|2>     upsampler, after the block's last resnet (and attention)
//   time_embed.0/.2, label_emb.0.0/.2, out.0, out.2   time/add embedding MLPs, norm, conv_out
// Inside a resnet: in_layers.0/.2 = norm1/conv1, emb_layers.1 = time_emb_proj, out_layers.0/.3 =
// norm2/conv2, skip_connection = conv_shortcut; inside attentions the names are the same.
//
// Contract: pure functions of the config. Unknown paths map to "".
#pragma once

#include <string>
#include <vector>

#include "agent/train/models/unet/unet_config.h"

namespace gleaner::train::unet {

struct ModulePathPair {
  std::string diffusers;  // e.g. "down_blocks.1.attentions.0"
  std::string ldm;        // e.g. "input_blocks.4.1"
};

// Every module (block, or sub-module where the two namings differ) of a UNet of this config.
std::vector<ModulePathPair> LdmModuleTable(const UNetConfig& c);

// Maps a module path (or a parameter key) through the table by its longest matching prefix
// ("down_blocks.1.attentions.0.transformer_blocks.0.attn1.to_q" ->
//  "input_blocks.4.1.transformer_blocks.0.attn1.to_q" in SDXL). "" if no entry matches.
std::string DiffusersToLdm(const std::vector<ModulePathPair>& table, const std::string& path);
std::string LdmToDiffusers(const std::vector<ModulePathPair>& table, const std::string& path);

}  // namespace gleaner::train::unet
