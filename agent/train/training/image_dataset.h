// lora-sd training examples from photos and captions: an image dataset (images/dataset.h: an
// archive or a folder, captions from `<image>.txt` else the prompts) encoded once, on the node,
// with the job's base model (models/diffusers_model.h), as diffusers' DreamBooth scripts do:
//
//   image --PrepareImage (resize the shorter side, seeded crop; images/transform.h)--> [3,H,W]
//         --VAE latent_dist.sample(generator) · scaling_factor (models/vae/image_latents.h)-->
//         latents
//   caption --tokenizer (max_length 77, padded)--> ids
//     SD 1.x/2.x: text_encoder(ids).last_hidden_state                     -> text [T, D]
//     SDXL:       concat(penultimate of text_encoder, of text_encoder_2)   -> text [T, D1+D2]
//                 text_encoder_2(ids_2).text_embeds                        -> pooled [P]
//                 (orig h, orig w, crop top, crop left, H, W)              -> time_ids [6]
//     FLUX:       T5 text_encoder_2(ids padded to max_sequence_length)     -> text [T, D]
//                 CLIP text_encoder(ids).pooler_output                     -> pooled [P]
//   FLUX latents: (latent_dist.sample - shift_factor) · scaling_factor
//
// Determinism: the only randomness is the crop (a hash of seed and image key) and the latent
// sample, drawn from one CPU generator seeded with `seed`, image by image in dataset order
// (instance images by path, then class images by path, then generated ones), so the result depends
// only on the dataset bytes, the model and the options (on a given device type: the VAE runs on
// CUDA when there is one).
//
// Cache: the encoding is written (durably) to `cache_path` as a lora-sd latent dataset file
// (dataset.h) whose safetensors metadata holds format "gleaner-encoded-images", version "1" and
// a key (sha256 of the dataset bytes and the options); a later call with the same key reads it
// back instead of encoding again. A cache that is unreadable or of another key is replaced.
//
// Errors: a bad dataset (empty, corrupt/truncated/huge image, a caption that is not UTF-8, ...)
// is an InvalidArgument whose message names the dataset and the file ("dataset: dog2.jpg: ...").
// Not thread-safe (the models are not).
#pragma once

#include <string>
#include <vector>

#include "agent/train/models/loader/diffusers_model.h"
#include "agent/train/training/dataset.h"
#include "shared/job_params.h"

namespace gleaner::train::training {

struct ImageEncoding {
  int height = 512, width = 512;  // target size in pixels (multiples of the VAE factor)
  uint64_t seed = 0;
  std::string instance_prompt, class_prompt;
  int64_t max_sequence_length = 512;  // FLUX: T5 tokens per caption
  // Class images generated for prior preservation (class_images.h): PNG files that follow the
  // dataset's own class images, captioned class_prompt, in this order.
  std::vector<std::string> generated_class_images;
};

// The job's options: its seed and prompts, and as target params.resolution, else the denoiser's
// sample size times the VAE's spatial factor (what the model was trained at: 512 for SD 1.5, 1024
// for SDXL and FLUX.1).
ImageEncoding ImageEncodingFor(const models::DiffusersModel& model, const LoraSdParams& params);

// True when the file's first bytes are a zip, tar or gzip archive (an image dataset), false for
// anything else (a latent dataset file, dataset.h).
bool IsImageArchive(const std::string& path);

// The number of class images (under class/) in the dataset.
Result<int64_t> CountClassImages(const std::string& dataset_path, const ImageEncoding& options);

// The encoded dataset (see above; generated class images count as class images, and the cache
// key covers their bytes). `model` needs its VAE and text encoders unless the cache
// holds the encoding already.
Result<Dataset> EncodeImageDataset(models::DiffusersModel& model, const std::string& dataset_path,
                                   const ImageEncoding& options, const std::string& cache_path);

// The padded caption ids of every example (instance images, then class images, in dataset
// order) for each of the model's tokenizers: [N, 77] and [M, 77] int64 per encoder (ids[k] for
// model.text[k]). For training the text encoders, which then encode the captions every step.
struct CaptionIds {
  std::vector<torch::Tensor> instance, prior;
};
Result<CaptionIds> TokenizeCaptions(const models::DiffusersModel& model,
                                    const std::string& dataset_path, const ImageEncoding& options);

}  // namespace gleaner::train::training
