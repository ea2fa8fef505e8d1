// What a lora-sd job (the diffusion LoRA kind) trains on, read from its SPEC.json
// (agent/protocol/trainer_protocol.h):
//
//   model.format "unet-safetensors" (or absent):
//                             inputs.model is the UNet weights file (.safetensors or a sharded
//                             .safetensors.index.json); model.config (or inputs.config, a path)
//                             its config; inputs.dataset a latent dataset file (dataset.h).
//   model.format "diffusers": inputs.model is a diffusers folder (models/loader/diffusers_model.h);
//                             inputs.dataset is either an image archive (zip/tar: photos and
//                             captions, encoded on the node: image_dataset.h, cached as
//                             `cache_dir`/encoded-dataset.safetensors) or a latent dataset file.
//                             With params.num_class_images, the class images the archive lacks
//                             are generated first (class_images.h, cached in `cache_dir`) and
//                             encoded with the rest; a latent dataset is then refused.
//
// Contract: errors are one Status naming the input and the file at fault; the caller fails the
// job with it (exit 2). `stop` is asked while class images are generated; when it says true the
// result has class_images.stopped set and nothing else (the caller exits as interrupted).
// Not thread-safe.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "agent/protocol/trainer_spec.h"
#include "agent/train/models/loader/diffusers_model.h"
#include "agent/train/nn/torch_io.h"
#include "agent/train/training/class_images.h"
#include "agent/train/training/dataset.h"
#include "agent/train/training/image_dataset.h"
#include "agent/train/training/trainer.h"
#include "shared/job_params.h"
#include "shared/json.h"

namespace gleaner::train::lora {

struct JobInputs {
  models::DenoiserConfig config;
  TensorMap denoiser_weights;  // as stored (F32/F16/BF16); Trainer::Create places them
  training::Dataset data;
  // A diffusers model only: its configs and tokenizers, and with an image dataset its VAE and
  // text encoders (the denoiser's weights moved out above).
  std::optional<models::DiffusersModel> model;
  // An image dataset with train_text_encoder only: the encoders and the captions' ids.
  training::TextTraining text;
  // What generating class images did (rendered 0: none were needed, or all were cached).
  training::ClassImages class_images;
};

// The encoded image dataset's cache in `cache_dir` (the run's --cache-dir, else its work dir).
std::string EncodedDatasetPath(const std::string& cache_dir);

Result<JobInputs> LoadJobInputs(const TrainerSpec& spec, const LoraSdParams& params,
                                const std::string& cache_dir,
                                const std::function<bool()>& stop = nullptr);

}  // namespace gleaner::train::lora
