// `gleaner-train forward` for the FLUX.1 transformer (forward_main.cc picks it: a config whose
// _class_name is FluxTransformer2DModel, or a single-file weights file).
//
//   inputs: hidden_states [B,S,in], encoder_hidden_states [B,T,joint], pooled_projections [B,P],
//           timestep [B] (σ in [0,1]), img_ids [S,3], txt_ids [T,3], guidance [B] (when the config
//           has guidance_embeds)
//   output: sample [B,S,out] (+ with R, the LoRA gradients of sum(sample * R), PEFT names)
//
// Contract: errors are one Status naming the file or tensor; never throws.
#pragma once

#include <string>

#include "shared/json.h"
#include "shared/status.h"

namespace gleaner::train {

struct FluxForwardArgs {
  const Json* config = nullptr;  // null: inferred from a single-file weights file
  std::string weights, inputs, lora, grad_weights, out;
  std::string device = "cpu", dtype = "fp32";
};

Status RunFluxForward(const FluxForwardArgs& a);

}  // namespace gleaner::train
