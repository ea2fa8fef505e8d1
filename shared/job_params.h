// Job kinds and their parameters: validation and defaulting, shared by the coordinator (at
// submission) and the trainer (which reads the same normalised params).
//
// Contract: NormalizeParams(kind, params) checks every field's type and range, rejects unknown
// fields, fills defaults, and returns the normalised object (every known field present). The
// coordinator stores exactly that object, so the trainer never sees an unchecked value.
// Errors are InvalidArgument with a message naming the field ("params.steps must be ...").
// Portable (no exceptions, no I/O). Thread-safe (pure functions).
#pragma once

#include <string>

#include "shared/json.h"
#include "shared/model_family.h"
#include "shared/status.h"

namespace gleaner {

constexpr int64_t kMaxJobSteps = 10000000;
constexpr int64_t kMaxSamplePrompts = 8;
constexpr int64_t kMaxSamplePromptChars = 1000;
constexpr int64_t kMaxClassImages = 1000;  // lora-sd num_class_images
// Upper bounds of the params that decide a trainer's memory, set at what a 24 GB card can do
// with the largest model the trainer supports (SDXL: 2.57e9 UNet parameters, 5.1 GB in fp16);
// the arithmetic is in job_params.cc and docs/api.md. A node checks the job against its own
// memory before allocating (docs/training.md, "Memory estimate").
constexpr int64_t kMaxBatchSize = 64;
constexpr int64_t kMaxLoraRank = 256;
constexpr int64_t kMaxSampleResolution = 2048;
// Largest integer every shell represents exactly (the edge shell is JavaScript).
constexpr int64_t kMaxSafeInteger = 9007199254740991;

// True for a kind the platform can run ("synthetic", "lora-sd").
bool IsKnownJobKind(const std::string& kind);

// True if the kind needs a model and a dataset input (lora-sd).
bool JobKindNeedsInputs(const std::string& kind);

// Validates and defaults params for kind. params must be a JSON object.
//  synthetic: steps (1..1e7, required), step_ms (0..60000, 0), checkpoint_every (1..steps,
//             min(100, steps)), seed (0..2^53-1, 0), fail_at_step (1..steps, optional),
//             crash_at_step (1..steps, optional).
//  lora-sd:   see LoraSdParams.
//  samples (both kinds, all absent = no samples): sample_prompts (1..8, each a string or
//             {prompt, negative_prompt}; normalised to objects with both), sample_every
//             (1..steps, checkpoint_every), sample_steps (1..1000, 25), guidance_scale (0..100,
//             7.5), sample_seed (0..2^53-1, seed), sample_resolution (8..kMaxSampleResolution,
//             multiple of 8, 512). The other sample fields without sample_prompts are refused.
//             synthetic also takes sample_ms (0..60000, 0: a test hook, time per sample image).
//  The family (of the job's model; kSdUnet when the model does not say) decides which lora-sd
//  fields apply and the family's defaults (guidance_scale 3.5 for FLUX).
Result<Json> NormalizeParams(const std::string& kind, const Json& params,
                             ModelFamily family = ModelFamily::kSdUnet);

// lora-sd params, typed: the one definition of their names, defaults and ranges (the coordinator
// validates submissions with it, the trainer reads its params through it).
struct LoraSdParams {
  int64_t steps = 0;                   // required, 1..1e7
  int64_t batch_size = 1;              // 1..kMaxBatchSize
  double learning_rate = 1e-4;         // (0, 1]
  int64_t rank = 4;                    // 1..kMaxLoraRank
  double alpha = 4;                    // default = rank
  int64_t seed = 0;                    // 0..2^53-1
  int64_t checkpoint_every = 0;        // 1..steps, default min(100, steps)
  std::string mixed_precision = "no";  // no | fp16 | bf16
  // How the frozen base weights are stored: "auto" (the compute dtype of mixed_precision) or "fp8"
  // (Linear weights in float8_e4m3fn, upcast per layer; needs a libtorch 2.1+ trainer). Kept in
  // the spec only when "fp8".
  std::string base_precision = "auto";
  bool gradient_checkpointing = false;
  int64_t gradient_accumulation = 1;          // 1..1024
  std::string lr_scheduler = "constant";      // constant | constant_with_warmup | linear | cosine
  int64_t warmup_steps = 0;                   // 0..steps
  ModelFamily family = ModelFamily::kSdUnet;  // not a field: the model's (see Parse)
  // kSdUnet only (DDPM):
  std::string prediction_type = "epsilon";  // epsilon | v_prediction
  double snr_gamma = 0;                     // 0 (off)..1000
  double noise_offset = 0;                  // 0..1
  // kFlux only (flow matching, as diffusers' train_dreambooth_lora_flux.py names them):
  // weighting_scheme picks the timestep density (logit_normal, mode; else uniform) and the loss
  // weight (sigma_sqrt, cosmap; else 1).
  std::string weighting_scheme = "none";  // none | sigma_sqrt | logit_normal | mode | cosmap
  double logit_mean = 0, logit_std = 1;   // logit_normal: u = sigmoid(N(mean, std))
  double mode_scale = 1.29;               // mode
  // Shift of the drawn sigmas: none, static (discrete_flow_shift, kohya's name), or resolution
  // (mu from the image token count, as FluxPipeline's schedule).
  std::string timestep_shift = "none";   // none | static | resolution
  double discrete_flow_shift = 3.0;      // 0.01..100
  double guidance = 1.0;                 // embedded guidance while training (FLUX.1-dev), 0..100
  int64_t max_sequence_length = 512;     // T5 tokens, 1..512
  std::string lora_targets = "default";  // default (diffusers' targets) | all (every Linear)
  double prior_loss_weight = 1.0;        // 0..1000
  double max_grad_norm = 1.0;            // 0 (no clipping)..1e6
  double adam_beta1 = 0.9, adam_beta2 = 0.999, adam_weight_decay = 0.01, adam_epsilon = 1e-8;
  // Image datasets (kept in the spec only when given): the caption of an image without a .txt,
  // the class folder's caption, and LoRA on the text encoders.
  std::string instance_prompt, class_prompt;  // up to 4096 bytes; "" = not given
  // The training size of photos in pixels (square; 64..4096, a multiple of 64); 0 = not given:
  // the model's native size (SD 1.5 512, SDXL and FLUX.1 1024).
  int64_t resolution = 0;
  // Prior preservation: class images wanted in all; those the dataset lacks are generated from
  // class_prompt with the base model before training (needs class_prompt). 0 = not given.
  int64_t num_class_images = 0;  // 1..kMaxClassImages
  bool has_train_text_encoder = false;
  bool train_text_encoder = false;
  // The text encoders' LoRA learning rate (with train_text_encoder); default learning_rate.
  bool has_text_encoder_lr = false;
  double text_encoder_lr = 1e-4;  // (0, 1]
  // Sample fields (see NormalizeParams), normalised; an empty object when sampling is off.
  Json samples = Json::object();

  // Validates (unknown fields, fields of another family, types, ranges) and fills defaults.
  static Result<LoraSdParams> Parse(const Json& params, ModelFamily family = ModelFamily::kSdUnet);
  // Every field, as stored in a job spec.
  Json ToJson() const;
};

// Checks a diffusers UNet2DConditionModel config object enough to reject what cannot train (the
// trainer validates it fully): an object with a non-empty block_out_channels array; every field
// within the trainer's own limits (unet_limits.h, named with the limit in the message); and when
// addition_embed_type is set, SDXL's "text_time" with integer addition_time_embed_dim >= 1 and
// projection_class_embeddings_input_dim greater than 6 * addition_time_embed_dim (the rest is the
// pooled text embedding). prefix names the field in messages ("model.config").
Status CheckUnetConfig(const Json& config, const std::string& prefix);

}  // namespace gleaner
