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
#include "shared/status.h"

namespace gleaner {

constexpr int64_t kMaxJobSteps = 10000000;
constexpr int64_t kMaxSamplePrompts = 8;
constexpr int64_t kMaxSamplePromptChars = 1000;
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
//  lora-sd:   steps (required), batch_size 1, learning_rate 1e-4, rank 4, alpha = rank, seed 0,
//             checkpoint_every min(100, steps), mixed_precision "no"|"fp16"|"bf16",
//             gradient_checkpointing false, gradient_accumulation 1, lr_scheduler constant |
//             constant_with_warmup | linear | cosine, warmup_steps 0, prediction_type epsilon |
//             v_prediction, prior_loss_weight 1.0, snr_gamma 0 (off), noise_offset 0,
//             max_grad_norm 1.0 (0 = no clipping), adam_beta1 0.9, adam_beta2 0.999,
//             adam_weight_decay 0.01, adam_epsilon 1e-8.
//  samples (both kinds, all absent = no samples): sample_prompts (1..8, each a string or
//             {prompt, negative_prompt}; normalised to objects with both), sample_every
//             (1..steps, checkpoint_every), sample_steps (1..1000, 25), guidance_scale (0..100,
//             7.5), sample_seed (0..2^53-1, seed), sample_resolution (8..4096, multiple of 8,
//             512). The other sample fields without sample_prompts are refused. synthetic also
//             takes sample_ms (0..60000, 0: a test hook, time per sample image).
Result<Json> NormalizeParams(const std::string& kind, const Json& params);

// Checks a diffusers UNet2DConditionModel config object enough to reject obvious garbage
// (the trainer validates it fully): an object with a non-empty block_out_channels array of
// positive integers. prefix names the field in messages ("model.config").
Status CheckUnetConfig(const Json& config, const std::string& prefix);

}  // namespace gleaner
