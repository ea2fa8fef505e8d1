// A tiny random Stable Diffusion model in diffusers layout, for tests and demos that must never
// download a real one: `gleaner-train make-model --diffusers DIR [--sdxl] [--seed S]`.
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

}  // namespace gleaner::train::models
