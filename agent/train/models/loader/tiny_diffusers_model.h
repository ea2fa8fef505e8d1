// A tiny random Stable Diffusion or FLUX.1 model in diffusers layout, for tests and demos that must
// never download a real one: `gleaner-train make-model --diffusers DIR [--sdxl] [--seed S]`.
//
// The folder holds every file LoadDiffusersModel (diffusers_model.h) reads, as diffusers and
// transformers write them: model_index.json; unet/ (unet::TinyConfig or TinySdxlConfig with
// sample_size 8); vae/ (AutoencoderKL with two 16-channel levels: images are 2x their latents, so
// the default resolution is 16); text_encoder/ (CLIPTextModel, hidden 32; SDXL: 16 and
// text_encoder_2/ CLIPTextModelWithProjection, hidden 16, projection 32); tokenizer/ and
// tokenizer_2/ (a byte-level BPE vocabulary of the printable ASCII characters, their word-final
// forms and a few merges; tokenizer_2 pads with "!"); scheduler/scheduler_config.json. Weights
// are fp32 safetensors, drawn from `seed` (the same seed gives the same bytes).
//
// Contract: writes into `dir` (created; existing files of the same names are replaced durably).
// Not thread-safe (it seeds libtorch's default generator).
#pragma once

#include <cstdint>
#include <string>

#include "shared/status.h"

namespace gleaner::train::models {

Status WriteTinyDiffusersModel(const std::string& dir, bool sdxl, uint64_t seed);

// A tiny random FLUX.1 model in diffusers layout (`make-model --diffusers DIR --flux`):
// transformer/ (flux::TinyFluxConfig); vae/ (as above with 4 latent channels, FLUX's
// shift_factor and scaling factor, no quant convs); text_encoder/ (CLIPTextModel whose hidden size
// is the pooled projection width) and tokenizer/ as above; text_encoder_2/ (T5EncoderModel, 2
// gated-gelu layers, d_model = joint_attention_dim) and tokenizer_2/tokenizer.json (a tiny Unigram
// vocabulary); scheduler/ (FLUX.1-dev's FlowMatchEulerDiscreteScheduler config).
Status WriteTinyFluxModel(const std::string& dir, uint64_t seed);

}  // namespace gleaner::train::models
