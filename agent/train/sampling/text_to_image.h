// Text to image: diffusers' StableDiffusionPipeline / StableDiffusionXLPipeline __call__ for one
// prompt, on the trainer's own modules (CLIP text encoders, the denoiser (denoiser/denoiser.h)
// with whatever LoRA is attached to it, the VAE) and a sampler of sampling/scheduler.h.
//
//   SD 1.x/2.x (one encoder):  c = last_hidden_state(tok(prompt))               [1,77,D]
//                              u = last_hidden_state(tok(negative_prompt))      ("" encoded too)
//   SDXL (two encoders):       c = cat(penultimate_1, penultimate_2, -1)        [1,77,D1+D2]
//                              pooled = text_embeds of encoder 2                [1,P]
//                              time_ids = [H, W, 0, 0, H, W] for both halves
//                              negative_prompt "" and force_zeros_for_empty_prompt: u and its
//                              pooled are zeros (diffusers' negative_prompt=None)
//   x_T = randn([1, latent_channels, H/f, W/f], CPU generator seeded `seed`) · init_noise_sigma
//   ε = ε_u + g·(ε_c − ε_u) from one denoiser call on [x; x] with [u; c] (g <= 1: ε_c alone)
//   image = round((vae.decode(x_0 / scaling_factor) / 2 + 0.5).clamp(0, 1) · 255)   uint8
//
// FLUX.1 (FluxPipeline; a flow-match model: TextToImageModel.t5 and .flow_match set):
//   c = T5 last_hidden_state(tok_2(prompt), padded to max_sequence_length)   [1,T,D]
//   pooled = CLIP pooler_output(tok(prompt))                                  [1,P]
//   guidance = [guidance_scale] when the transformer embeds guidance (dev); no CFG, no negative
//   x_1 = randn([1, C, H/f, W/f]) (the same numbers FluxPipeline packs into tokens)
//   σ_i, t_i = sampling/flow_match.h InferenceSchedule(steps, (H/2f)·(W/2f))
//   x ← x + (σ_{i+1} − σ_i) · denoiser(x, t_i / 1000)
//   image = round((vae.decode(x_0 / scaling_factor + shift_factor) / 2 + 0.5).clamp(0, 1) · 255)
// Prompts are tokenized to max_position_embeddings tokens (77), truncated as diffusers does.
//
// Contract: RenderImage runs without autograd and with every module in eval mode, and puts each
// module's train/eval mode back as it was; it draws random numbers only from its own generator,
// so it leaves a training run's state (RNG, LoRA weights, optimizer) untouched. Same inputs on
// the same device: the same bytes. On CUDA, a denoiser whose base weights are bf16/fp16 runs
// under autocast in that dtype (as the trainer does); everything else is fp32. `stop`, when
// given, is asked before each denoiser call: when it says true, RenderImage returns an undefined
// tensor (no image, no error). Errors (mismatched modules, bad sizes, libtorch failures) are
// Status. Not thread-safe (the modules are not).
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/train/denoiser/denoiser.h"
#include "agent/train/models/text/clip_text_model.h"
#include "agent/train/models/text/clip_tokenizer.h"
#include "agent/train/models/text/t5_encoder.h"
#include "agent/train/models/text/t5_tokenizer.h"
#include "agent/train/models/vae/autoencoder_kl.h"
#include "agent/train/sampling/flow_match.h"
#include "agent/train/sampling/scheduler_config.h"
#include "shared/status.h"

namespace gleaner::train::sampling {

struct PromptEncoder {
  text::ClipTokenizer tokenizer;
  std::shared_ptr<text::ClipTextModel> model;
};

// FLUX's T5 prompt encoder.
struct T5PromptEncoder {
  text::T5Tokenizer tokenizer;
  std::shared_ptr<text::T5Encoder> model;
  int64_t max_sequence_length = 512;
};

// The pipeline's modules; shared with their owner (e.g. the trainer owns the denoiser).
struct TextToImageModel {
  std::vector<PromptEncoder> encoders;  // 1: SD 1.x/2.x, FLUX; 2: SDXL
  std::optional<T5PromptEncoder> t5;    // FLUX
  std::shared_ptr<Denoiser> denoiser;
  std::shared_ptr<vae::AutoencoderKL> vae;
  SchedulerConfig scheduler;                  // DDPM-family samplers
  std::optional<FlowMatchConfig> flow_match;  // FLUX: the flow-match Euler sampler instead
  bool force_zeros_for_empty_prompt = true;   // SDXL's model_index.json flag (its default)
};

struct ImageRequest {
  std::string prompt;
  std::string negative_prompt;  // "" = none
  int64_t steps = 25;
  double guidance_scale = 7.5;
  uint64_t seed = 0;
  int64_t height = 512, width = 512;  // pixels, multiples of the VAE factor
};

// InvalidArgument naming the mismatch unless the modules fit together (denoiser/denoiser.h's
// shape): 1 encoder of the context width (SD) or 2 whose penultimate widths sum to it, the
// second with a projection of the pooled width (SDXL: time_ids); FLUX: T5 of the context width
// and 1 CLIP encoder of the pooled width, with a flow-match scheduler; VAE latent channels = the
// denoiser's.
Status CheckTextToImageModel(const TextToImageModel& model);

// The denoiser's conditioning for a request, rows [uncond; cond] when guidance_scale > 1, else
// cond alone; fp32 on the denoiser's device: text [R,77,D]; SDXL: pooled [R,P], time_ids [R,6].
// FLUX: one row, text [1,T,D], pooled [1,P], guidance [1] (with a guidance embedding).
// Call under NoGradGuard.
Result<Conditioning> EncodeConditioning(const TextToImageModel& model, const ImageRequest& request);

// One image: uint8 RGB [1, 3, height, width] on the CPU (vae::EncodePngs writes it), or an
// undefined tensor when `stop` asked to stop.
Result<torch::Tensor> RenderImage(const TextToImageModel& model, const ImageRequest& request,
                                  const std::function<bool()>& stop = nullptr);

}  // namespace gleaner::train::sampling
