// The peak memory of a lora-sd job, estimated from its configs and params before anything large
// is allocated, and the check of that estimate against the node's budget
// (common/memory_budget.h). The trainer runs the check right after reading the configs (and the
// latent dataset's shape), before it reads a weights file or builds a module, so a job that
// cannot fit exits 2 at once with one line naming the setting to lower instead of taking the
// node's memory (docs/training.md, "Memory estimate").
//
// What is counted (bytes; "device" is the GPU on a CUDA run, the host otherwise):
//   denoiser_weights  the frozen UNet in its placement dtype (bf16/fp16 under mixed precision on
//                 CUDA, bf16 on the CPU; else fp32), counted from the config exactly as the
//                 module is built (tests compare with the built module's numel);
//   load_copy     the weights as read (fp32), alive beside the placed UNet while it loads (none
//                 on an fp32 CPU run: the placed tensors are the ones read);
//   lora          LoRA A/B of every attention projection (UNet, and the text encoders with
//                 train_text_encoder) in fp32, with gradients and AdamW's two moments (16 B each);
//   activations   what one micro-batch's forward keeps for backward: per resnet and transformer
//                 layer the tensors it saves (C·H·W multiples; the explicit attention kernel's
//                 B·heads·L² scores and probabilities), or with gradient_checkpointing only each
//                 layer's input plus the largest layer recomputed in backward; the batch doubles
//                 with prior preservation;
//   encoders      VAE and text encoders (fp32) when the job loads them (an image dataset or
//                 samples), and encoding the photos at the training resolution (one image at a
//                 time, no gradients);
//   sampling      rendering one sample at sample_resolution: the UNet's largest block with
//                 classifier-free guidance (batch 2), and the VAE decoder at full size;
//   runtime       the process itself: libtorch's code and CPU allocator (kHostRuntimeBytes), or
//                 the CUDA context and its kernels on the GPU (kCudaRuntimeBytes).
// Peak = runtime + weights + lora + encoders + max(activations, sampling, load_copy). The figures
// are an upper estimate of libtorch's working set (allocator caches and fragmentation are not
// modelled: check_margin covers them); docs/training.md compares them with measured peaks.
//
// Pure functions of their inputs: no I/O, no libtorch. Thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "agent/train/models/text/clip_text_config.h"
#include "agent/train/models/unet/unet_config.h"
#include "agent/train/models/vae/vae_config.h"
#include "shared/job_params.h"
#include "shared/status.h"

namespace gleaner::train::training {

// The estimate knows the UNet family's layer structure (a new family adds its counts here).
using unet::UNetConfig;

struct MemoryJob {
  UNetConfig unet;
  bool has_vae = false;  // the VAE is loaded (image dataset or samples)
  vae::VaeConfig vae;
  std::vector<text::ClipTextConfig> text;         // the text encoders loaded (none: none)
  int64_t latent_height = 64, latent_width = 64;  // the training latents
  int64_t text_tokens = 77;                       // tokens per caption
  bool prior = false;                             // prior preservation: twice the batch
  bool encode_images = false;                     // photos encoded on the node
  bool cuda = false;                              // training on a GPU
  bool fused_attention = false;                   // no B·heads·L² scores (attention.h)
};

struct MemoryEstimate {
  double denoiser_weights = 0, load_copy = 0, lora = 0, activations = 0, encoders = 0, sampling = 0;
  double runtime = 0;
  double device_peak = 0;  // on the GPU (CUDA) or the host (CPU)
  double host_peak = 0;    // on the host; equals device_peak on the CPU
  // The part that decides the peak beyond the fixed ones: "activations", "sampling", "load"
  // or "weights" (nothing a param can lower).
  std::string dominant;
};

int64_t UNetParameterCount(const UNetConfig& c);
// LoRA parameters on the UNet at `rank` (A and B of to_q/k/v/out of every attention).
int64_t UNetLoraParameterCount(const UNetConfig& c, int64_t rank);
int64_t VaeParameterCount(const vae::VaeConfig& c);
int64_t ClipTextParameterCount(const text::ClipTextConfig& c);

MemoryEstimate EstimateMemory(const MemoryJob& job, const LoraSdParams& params);

// The process itself: a tiny CPU job peaks at about 180 MiB of RSS (docs/training.md), counted
// with room; the CUDA context and its kernels on the GPU.
constexpr double kHostRuntimeBytes = 300.0 * 1024 * 1024;
constexpr double kCudaRuntimeBytes = 600.0 * 1024 * 1024;

// What the check allows: the estimate times check_margin must fit the budget.
constexpr double kMemoryCheckMargin = 1.10;

// Ok when the estimate fits; otherwise InvalidArgument (the job's input: exit 2) with one line:
// "needs about X GiB of VRAM (N GiB available): lower batch_size (8)". A budget of 0 bytes means
// unknown and passes.
Status CheckMemory(const MemoryEstimate& e, bool cuda, const LoraSdParams& params,
                   int64_t host_budget_bytes, int64_t device_budget_bytes);

// Fills e's runtime, peaks and dominant part from its other parts (the rule above; every
// family's estimate ends with it).
void FinishEstimate(bool cuda, MemoryEstimate* e);

}  // namespace gleaner::train::training
