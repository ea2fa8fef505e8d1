// The peak memory of a FLUX.1 LoRA job (memory_estimate.h's counterpart for the flow-matching
// transformer), estimated from the configs and params before anything large is read, with the
// same budget check (CheckMemory) and the same parts:
//
//   weights      the frozen transformer: 36·D² + 30·D per double-stream block, 15·D² + 11·D per
//                single-stream block (D = heads · head_dim), plus embedders and the output
//                (FluxParameterCount), at 1 byte (base_precision fp8), 2 (bf16/fp16) or 4;
//                load_copy: the weights as read beside the placed ones while it builds;
//   lora         rank·(in + out) per adapted Linear (diffusers' targets: 36·D·r per double
//                block, 6·D·r per single block; lora_targets "all": 50·D·r and 21·D·r), fp32
//                with gradient and AdamW's two moments (16 B);
//   activations  per block over L = image tokens + text tokens: without checkpointing about
//                20·L·D values kept per block (q, k, v, attention out, the 4·D MLP before and
//                after GELU, norms and modulated inputs), with it only each block's input
//                (2 streams: L·D) plus one block recomputed; the explicit attention kernel adds
//                heads·L² scores and probabilities;
//   encoders     T5, CLIP and the VAE (fp32) while the photos are encoded or samples render;
//   sampling     one transformer pass without gradients at the sample size, and the VAE
//                decoder at full size.
// Image tokens: (H/16)·(W/16) for FLUX.1's factor-8 VAE (2x2 latent patches).
//
// Pure functions of their inputs: no I/O, no libtorch. Thread-safe.
#pragma once

#include <cstdint>

#include "agent/train/models/flux/flux_config.h"
#include "agent/train/models/text/clip_text_config.h"
#include "agent/train/models/text/t5_config.h"
#include "agent/train/models/vae/vae_config.h"
#include "agent/train/training/memory_estimate.h"
#include "shared/job_params.h"

namespace gleaner::train::training {

struct FluxMemoryJob {
  flux::FluxConfig transformer;
  int64_t image_tokens = 1024;  // (H/16)·(W/16): 1024 at 512², 4096 at 1024²
  int64_t text_tokens = 512;    // max_sequence_length
  bool prior = false;           // prior preservation: twice the batch
  bool encoders = false;        // T5, CLIP and the VAE loaded (photos to encode, or samples)
  text::T5Config t5;
  text::ClipTextConfig clip;
  vae::VaeConfig vae;
  bool cuda = false;
  bool fused_attention = false;
};

int64_t FluxParameterCount(const flux::FluxConfig& c);
int64_t FluxLoraParameterCount(const flux::FluxConfig& c, int64_t rank, bool all_linears);
int64_t T5ParameterCount(const text::T5Config& c);

MemoryEstimate EstimateFluxMemory(const FluxMemoryJob& job, const LoraSdParams& params);

}  // namespace gleaner::train::training
