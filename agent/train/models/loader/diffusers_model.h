// A base model in diffusers layout (SD 1.x/2.x, SDXL and FLUX.1), read from its folder:
//
//   model_index.json                   a JSON object (the pipeline's component list)
//   unet/config.json                   UNet2DConditionModel config (models/unet/unet_config.h)
//   unet/<weights>                     the UNet state dict
//   transformer/config.json, <w>       FLUX.1 instead of unet/: FluxTransformer2DModel
//                                      (models/flux/flux_config.h)
//   vae/config.json, vae/<weights>     AutoencoderKL (models/vae/autoencoder_kl.h)
//   text_encoder/config.json, <w>      CLIPTextModel (models/text/clip_text_model.h)
//   tokenizer/vocab.json, merges.txt   CLIP BPE (models/text/clip_tokenizer.h)
//   text_encoder_2/, tokenizer_2/      SDXL: CLIPTextModelWithProjection and its tokenizer;
//                                      FLUX: T5EncoderModel and tokenizer_2/tokenizer.json
//   scheduler/scheduler_config.json    the noise schedule and sampler settings (a JSON object)
//
// <weights> is, first found: <stem>.safetensors, <stem>.safetensors.index.json (sharded),
// <stem>.fp16.safetensors, <stem>.fp16.safetensors.index.json, where <stem> is
// diffusion_pytorch_model (unet/, transformer/, vae/) or model (text encoders). Pickle
// (.bin/.ckpt) weights are never read.
//
// A model is FLUX exactly when it has transformer/; SDXL exactly when its UNet config has
// addition_embed_type "text_time"; both then need the *_2 folders. The loader checks that the
// parts fit together: VAE latent_channels equals the UNet's in_channels (FLUX: the denoiser's
// latent channels, 2x2 patches of them per token); SD: text_encoder hidden_size equals
// cross_attention_dim; SDXL: the two hidden sizes add up to cross_attention_dim and
// text_encoder_2's projection_dim equals the UNet's pooled size, and text_encoder_2 has a
// projection; FLUX: CLIP's hidden_size equals pooled_projection_dim and T5's d_model
// joint_attention_dim.
//
// Contract: LoadDiffusersModel reads only what DiffusersLoadOptions asks for, beyond the configs
// and tokenizers (always read: they are small and every use needs them). Errors are one Status
// whose message starts with the file (or folder) at fault: "<dir>/unet/config.json: ...",
// "<dir>/tokenizer/merges.txt: ...", "<dir>/unet: no diffusion_pytorch_model.safetensors ...".
// Never throws (libtorch errors are caught). The folder is only read. Models are fp32, frozen,
// on the CPU, in eval mode; the denoiser's weights come as a TensorMap in `denoiser_dtype` for
// training::Trainer::Create (it places them: models/loader/denoisers.h). The result owns
// everything; not thread-safe.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/train/models/loader/denoisers.h"
#include "agent/train/models/text/clip_text_model.h"
#include "agent/train/models/text/clip_tokenizer.h"
#include "agent/train/models/text/t5_config.h"
#include "agent/train/models/text/t5_encoder.h"
#include "agent/train/models/text/t5_tokenizer.h"
#include "agent/train/models/unet/unet_config.h"
#include "agent/train/models/vae/autoencoder_kl.h"
#include "agent/train/nn/torch_io.h"
#include "shared/json.h"
#include "shared/status.h"

namespace gleaner::train::models {

struct DiffusersModel;

struct DiffusersLoadOptions {
  bool denoiser = true;       // read unet/ or transformer/<weights> into denoiser_weights
  bool vae = true;            // build the VAE
  bool text_encoders = true;  // build the text encoder(s)
  // F32/F16/BF16 denoiser weights are converted to this dtype (F32, F16 or BF16).
  torch::ScalarType denoiser_dtype = torch::kFloat32;
  // Called once every config is read and checked (CheckFits), before any weights file is read
  // or any module is built; an error stops the load with that Status (the caller's memory check:
  // training/memory_estimate.h).
  std::function<Status(const DiffusersModel&)> before_large_files;
};

// One CLIP text encoder with its tokenizer. SD 1.x and FLUX: one; SDXL: text_encoder then
// text_encoder_2.
struct TextEncoderPart {
  std::string name;  // "text_encoder" or "text_encoder_2"
  text::ClipTokenizer tokenizer;
  text::ClipTextConfig config;
  std::shared_ptr<text::ClipTextModel> model;  // null unless options.text_encoders
};

// FLUX's T5 encoder (text_encoder_2/) with its tokenizer (tokenizer_2/tokenizer.json).
struct T5Part {
  text::T5Tokenizer tokenizer;
  text::T5Config config;
  std::shared_ptr<text::T5Encoder> model;  // null unless options.text_encoders
};

struct DiffusersModel {
  std::string dir;
  Json model_index;                // model_index.json as read
  DenoiserConfig denoiser_config;  // unet/ or transformer/
  TensorMap denoiser_weights;      // empty unless options.denoiser
  vae::VaeConfig vae_config;
  std::shared_ptr<vae::AutoencoderKL> vae;  // null unless options.vae
  std::vector<TextEncoderPart> text;  // CLIP: 1 (SD, FLUX) or 2 (SDXL) entries, tokenizers always
  std::optional<T5Part> t5;           // FLUX only; tokenizer and config always
  Json scheduler_config;              // scheduler/scheduler_config.json as read

  // The UNet's config; null for another family.
  const unet::UNetConfig* unet() const { return std::get_if<unet::UNetConfig>(&denoiser_config); }
  bool sdxl() const { return unet() != nullptr && unet()->has_text_time(); }
  bool flux() const { return std::holds_alternative<flux::FluxConfig>(denoiser_config); }
  DenoiserShape denoiser_shape() const { return ShapeOf(denoiser_config); }
};

Result<DiffusersModel> LoadDiffusersModel(const std::string& dir,
                                          const DiffusersLoadOptions& options = {});

// The weights file of one component folder (see the order above), or NotFound naming the folder.
Result<std::string> FindComponentWeights(const std::string& component_dir, const std::string& stem);

}  // namespace gleaner::train::models
