// The original single-file FLUX layout (Black Forest Labs' flux1-dev.safetensors, as ComfyUI and
// Forge hold it, with or without the "model.diffusion_model." prefix) and its mapping to
// diffusers' FluxTransformer2DModel names:
//   img_in, txt_in, time_in / vector_in / guidance_in.{in,out}_layer, final_layer.linear  renames
//   final_layer.adaLN_modulation.1       (shift, scale): diffusers' norm_out.linear is (scale,
//   shift) double_blocks.N.{img,txt}_attn.qkv   q, k, v stacked on dim 0 (to_q/k/v, add_q/k/v_proj)
//   double_blocks.N.{img,txt}_mod.lin, _attn.proj, _mlp.{0,2}, _attn.norm.{query,key}_norm.scale
//   single_blocks.N.linear1              q, k, v, proj_mlp stacked on dim 0
//   single_blocks.N.linear2, modulation.lin, norm.{query,key}_norm.scale
// The file holds no RoPE axes: InferFluxConfig takes FLUX.1's [16, 56, 56] for head dim 128, else
// [d/4, d/4, d/2] (a config.json, when there is one, says better).
//
// Contract: pure functions of their arguments (tensors are shared or sliced, not copied, except
// for the final modulation's swap). Errors are InvalidArgument naming the missing blocks or keys.
#pragma once

#include <string>
#include <vector>

#include "agent/train/models/flux/flux_config.h"
#include "agent/train/nn/torch_io.h"

namespace gleaner::train::flux {

// One module of the single-file layout and the diffusers modules stacked (dim 0) into it, in
// order (one for a plain rename).
struct BflModule {
  std::string bfl;
  std::vector<std::string> diffusers;
};
// Every Linear-like module of a config's blocks (double then single, block by block), for
// weights and for kohya LoRA names.
std::vector<BflModule> FluxBlockModules(const FluxConfig& c);

// True when the keys are the single-file layout's (img_in and double_blocks or single_blocks,
// with or without "model.diffusion_model.").
bool IsFluxSingleFile(const TensorMap& weights);
// The config a single file implies (blocks counted, dims from the shapes, heads from the q/k norm
// scale size, guidance from guidance_in); names the missing blocks if any.
Result<FluxConfig> InferFluxConfig(const TensorMap& single_file);
// diffusers-named weights from a single file (other components' keys in a full checkpoint, those
// outside "model.diffusion_model.", are ignored when the prefix is used).
Result<TensorMap> DiffusersFromSingleFile(const TensorMap& single_file);
// The reverse, with the "model.diffusion_model." prefix unless `prefix` is false.
Result<TensorMap> SingleFileFromDiffusers(const TensorMap& diffusers, const FluxConfig& c,
                                          bool prefix = true);

}  // namespace gleaner::train::flux
