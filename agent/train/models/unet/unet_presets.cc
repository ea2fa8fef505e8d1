// Named configurations: the real SD 1.5 and SDXL architectures and the tiny test ones.
#include "agent/train/models/unet/unet_config.h"

namespace gleaner::train::unet {

void SetTransformerLayers(UNetConfig* c, const std::vector<int>& per_block) {
  size_t n = per_block.size();
  c->down_transformer_layers.clear();
  c->up_transformer_layers.clear();
  for (size_t i = 0; i < n; ++i) {
    c->down_transformer_layers.emplace_back(size_t(c->layers_per_block[i]), per_block[i]);
    c->up_transformer_layers.emplace_back(size_t(c->layers_per_block[n - 1 - i] + 1),
                                          per_block[n - 1 - i]);
  }
}

UNetConfig Sd15Config() {
  UNetConfig c;
  c.block_out_channels = {320, 640, 1280, 1280};
  c.down_block_types = {"CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D",
                        "DownBlock2D"};
  c.up_block_types = {"UpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D",
                      "CrossAttnUpBlock2D"};
  c.layers_per_block = {2, 2, 2, 2};
  c.num_heads = {8, 8, 8, 8};
  SetTransformerLayers(&c, {1, 1, 1, 1});
  c.cross_attention_dim = 768;
  c.norm_num_groups = 32;
  c.sample_size = {64};
  return c;
}

UNetConfig SdxlConfig() {
  UNetConfig c;
  c.block_out_channels = {320, 640, 1280};
  c.down_block_types = {"DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"};
  c.up_block_types = {"CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"};
  c.layers_per_block = {2, 2, 2};
  c.num_heads = {5, 10, 20};  // head_dim 64 everywhere
  SetTransformerLayers(&c, {1, 2, 10});
  c.cross_attention_dim = 2048;
  c.norm_num_groups = 32;
  c.use_linear_projection = true;
  c.sample_size = {128};
  c.addition_embed_type = "text_time";
  c.addition_time_embed_dim = 256;
  c.projection_class_embeddings_input_dim = 2816;  // 1280 pooled + 6 * 256
  return c;
}

UNetConfig TinyConfig() {
  UNetConfig c;
  c.block_out_channels = {32, 64};
  c.down_block_types = {"CrossAttnDownBlock2D", "DownBlock2D"};
  c.up_block_types = {"UpBlock2D", "CrossAttnUpBlock2D"};
  c.layers_per_block = {1, 1};
  c.num_heads = {4, 4};
  SetTransformerLayers(&c, {1, 1});
  c.cross_attention_dim = 32;
  c.norm_num_groups = 8;
  c.sample_size = {16};
  return c;
}

UNetConfig TinySdxlConfig() {
  UNetConfig c;
  c.block_out_channels = {32, 64};
  // Attention on both levels (SDXL has none on its first): with LoRA only on a 4x4 level, 8x8
  // test latents would not be learnable in a few steps.
  c.down_block_types = {"CrossAttnDownBlock2D", "CrossAttnDownBlock2D"};
  c.up_block_types = {"CrossAttnUpBlock2D", "CrossAttnUpBlock2D"};
  c.layers_per_block = {1, 1};
  c.num_heads = {2, 4};
  SetTransformerLayers(&c, {1, 2});
  c.cross_attention_dim = 32;
  c.norm_num_groups = 8;
  c.use_linear_projection = true;
  c.sample_size = {16};
  c.addition_embed_type = "text_time";
  c.addition_time_embed_dim = 8;
  c.projection_class_embeddings_input_dim = 80;  // 32 pooled + 6 * 8
  return c;
}

}  // namespace gleaner::train::unet
