// Prior-preservation class images generated on the node, as diffusers' DreamBooth scripts do
// before training (train_dreambooth*.py, --with_prior_preservation): when a job asks for
// num_class_images and its dataset holds fewer class images (under class/), the missing ones are
// rendered from class_prompt by the BASE model (no LoRA) and join the dataset as class images.
//
//   missing = num_class_images - (class images in the dataset)        (none when <= 0)
//   image i, 0 <= i < missing:
//     RenderImage(base denoiser, prompt = class_prompt, negative_prompt "",
//                 steps 25, guidance_scale 7.5 (ImageRequest's defaults, the samples' defaults),
//                 sampler = the model folder's own (diffusers_pipeline.h: Euler unless DDIM),
//                 seed = images::DrawU64(job seed, i, kClassImageDraw),
//                 height x width = the model's native size (ImageEncodingFor: sample_size x the
//                 VAE's factor, what the model was trained at; the size the photos are cropped to))
//     -> <dir>/<i as %04d>.png, dir = ClassImagesDir(cache_dir, ...)
//
// Image i depends only on the model, the prompt, the job seed, the size and i: not on how many
// are missing, on the order of generation, or on an interruption. Same inputs on the same device:
// the same bytes (on CUDA the denoiser runs as text_to_image.h says).
//
// Cache: each image is written durably (temp file, fsync, rename) as soon as it is rendered, in a
// directory of the job's cache dir (kept by the agent across the job's leases on the node) named
// by a key of the request (prompt, seed, size, steps, guidance, mixed_precision; the model is the
// job's and does not change). A file already there that decodes as a PNG of the right
// size is reused; anything else in its place is rendered again. So a stop (SIGTERM) loses at most
// the image being rendered, and a restart renders only what is still missing.
//
// Errors: Status (the model cannot render, I/O). Not thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "agent/train/models/loader/diffusers_model.h"
#include "agent/train/nn/torch_io.h"

namespace gleaner::train::training {

struct ClassImageRequest {
  std::string prompt;  // class_prompt
  uint64_t seed = 0;   // the job's seed
  int64_t height = 512, width = 512;
  int64_t count = 0;  // the missing images: indices 0..count-1
  // The job's mixed_precision: the base denoiser is placed as the trainer places it
  // (nn/placement.h), so a model that trains in bf16 also renders in it.
  std::string mixed_precision = "no";
};

// What GenerateClassImages did.
struct ClassImages {
  std::vector<std::string> paths;  // <dir>/<i>.png for i < count, in index order
  int64_t rendered = 0;            // images rendered now (the rest were in the cache)
  double seconds = 0;              // wall time spent rendering
  bool stopped = false;            // `stop` said true: paths is empty, nothing more to do
};

// The cache directory of a request's images under `cache_dir`.
std::string ClassImagesDir(const std::string& cache_dir, const ClassImageRequest& request);

// The seed of image i of a job with seed `seed`.
uint64_t ClassImageSeed(uint64_t seed, int64_t i);

// Renders the images of `request` that the cache lacks with the base denoiser (built here from
// `denoiser_weights` through models/loader/denoisers.h, released before returning) and the VAE,
// text encoders and scheduler of `model` (loaded with them). `stop` is asked before every denoiser
// call.
Result<ClassImages> GenerateClassImages(const models::DiffusersModel& model,
                                        const TensorMap& denoiser_weights,
                                        const ClassImageRequest& request,
                                        const std::string& cache_dir,
                                        const std::function<bool()>& stop);

}  // namespace gleaner::train::training
