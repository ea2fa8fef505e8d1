// A Stable Diffusion base model in diffusers layout (SD 1.x/2.x and SDXL), read from its folder:
//
//   model_index.json                   a JSON object (the pipeline's component list)
//   unet/config.json                   UNet2DConditionModel config (models/unet/unet_config.h)
//   unet/<weights>                     the UNet state dict
//   vae/config.json, vae/<weights>     AutoencoderKL (models/vae/autoencoder_kl.h)
//   text_encoder/config.json, <w>      CLIPTextModel (models/text/clip_text_model.h)
//   tokenizer/vocab.json, merges.txt   CLIP BPE (models/text/clip_tokenizer.h)
//   text_encoder_2/, tokenizer_2/      SDXL only: CLIPTextModelWithProjection and its tokenizer
//   scheduler/scheduler_config.json    the noise schedule and sampler settings (a JSON object)
//
// <weights> is, first found: <stem>.safetensors, <stem>.safetensors.index.json (sharded),
// <stem>.fp16.safetensors, <stem>.fp16.safetensors.index.json, where <stem> is
// diffusion_pytorch_model (unet/, vae/) or model (text encoders). Pickle (.bin/.ckpt) weights
// are never read.
//
// A model is SDXL exactly when its UNet config has addition_embed_type "text_time"; it then needs
// the *_2 folders. The loader checks that the parts fit together: VAE latent_channels equals the
// UNet's in_channels; SD: text_encoder hidden_size equals cross_attention_dim; SDXL: the two
// hidden sizes add up to cross_attention_dim and text_encoder_2's projection_dim equals the
// UNet's pooled size, and text_encoder_2 has a projection.
//
// Contract: LoadDiffusersModel reads only what DiffusersLoadOptions asks for, beyond the configs
// and tokenizers (always read: they are small and every use needs them). Errors are one Status
// whose message starts with the file (or folder) at fault: "<dir>/unet/config.json: ...",
// "<dir>/tokenizer/merges.txt: ...", "<dir>/unet: no diffusion_pytorch_model.safetensors ...".
// Never throws (libtorch errors are caught). The folder is only read. Models are fp32, frozen,
// on the CPU, in eval mode; UNet weights come as a TensorMap in `unet_dtype` for
// training::Trainer::Create (it places them: models/loader/denoisers.h). The result owns
// everything; not thread-safe.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "agent/train/models/loader/denoisers.h"
#include "agent/train/models/text/clip_text_model.h"
#include "agent/train/models/text/clip_tokenizer.h"
#include "agent/train/models/unet/unet_config.h"
#include "agent/train/models/vae/autoencoder_kl.h"
#include "agent/train/nn/torch_io.h"
#include "shared/json.h"
#include "shared/status.h"

namespace gleaner::train::models {

struct DiffusersModel;

struct DiffusersLoadOptions {
  bool unet = true;           // read unet/<weights> into unet_weights
  bool vae = true;            // build the VAE
  bool text_encoders = true;  // build the text encoder(s)
  // F32/F16/BF16 UNet weights are converted to this dtype (F32, F16 or BF16).
  torch::ScalarType unet_dtype = torch::kFloat32;
  // Called once every config is read and checked (CheckFits), before any weights file is read
  // or any module is built; an error stops the load with that Status (the caller's memory check:
  // training/memory_estimate.h).
  std::function<Status(const DiffusersModel&)> before_large_files;
};

// One text encoder with its tokenizer. SD 1.x: one; SDXL: text_encoder then text_encoder_2.
struct TextEncoderPart {
  std::string name;  // "text_encoder" or "text_encoder_2"
  text::ClipTokenizer tokenizer;
  text::ClipTextConfig config;
  std::shared_ptr<text::ClipTextModel> model;  // null unless options.text_encoders
};

struct DiffusersModel {
  std::string dir;
  Json model_index;              // model_index.json as read
  unet::UNetConfig unet_config;  // the denoiser (today every model folder has a UNet)
  TensorMap unet_weights;        // empty unless options.unet
  vae::VaeConfig vae_config;
  std::shared_ptr<vae::AutoencoderKL> vae;  // null unless options.vae
  std::vector<TextEncoderPart> text;        // 1 (SD) or 2 (SDXL) entries, tokenizers always
  Json scheduler_config;                    // scheduler/scheduler_config.json as read

  bool sdxl() const { return unet_config.has_text_time(); }
  DenoiserConfig denoiser_config() const { return unet_config; }
  DenoiserShape denoiser_shape() const { return ShapeOf(denoiser_config()); }
};

Result<DiffusersModel> LoadDiffusersModel(const std::string& dir,
                                          const DiffusersLoadOptions& options = {});

// The weights file of one component folder (see the order above), or NotFound naming the folder.
Result<std::string> FindComponentWeights(const std::string& component_dir, const std::string& stem);

}  // namespace gleaner::train::models
