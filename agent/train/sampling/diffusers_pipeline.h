// The text-to-image pipeline (text_to_image.h) of a diffusers model folder read by
// models/loader/diffusers_model.h, around a denoiser the caller owns (a trainer's, with its
// LoRA, or one built from the folder's weights: models/loader/denoisers.h).
//
// The sampler: `sampler` when given ("euler" or "ddim"), else the folder's own
// scheduler/scheduler_config.json class when it is EulerDiscreteScheduler or DDIMScheduler,
// else Euler on that config (every DDPM-family config, e.g. SD 1.5's PNDM one, is compatible).
// force_zeros_for_empty_prompt comes from model_index.json (default true). A FLUX folder samples
// with the flow-match Euler sampler on its scheduler config ("flow-match-euler" is the only name
// it takes), T5 prompts of 512 tokens (the caller may set t5->max_sequence_length).
//
// Contract: the pipeline shares the model's VAE, tokenizers and text encoders (which must have
// been loaded: DiffusersLoadOptions vae and text_encoders). InvalidArgument naming the problem for
// a bad sampler name, a refused scheduler config or modules that do not fit together.
#pragma once

#include <memory>
#include <string>

#include "agent/train/models/loader/diffusers_model.h"
#include "agent/train/sampling/text_to_image.h"

namespace gleaner::train::sampling {

Result<TextToImageModel> TextToImageFrom(const models::DiffusersModel& model,
                                         std::shared_ptr<Denoiser> denoiser,
                                         const std::string& sampler = "");

}  // namespace gleaner::train::sampling
