#include "agent/train/training/flux_memory_estimate.h"

#include <algorithm>

namespace gleaner::train::training {

int64_t FluxParameterCount(const flux::FluxConfig& c) {
  const int64_t d = c.inner_dim(), h = c.attention_head_dim;
  const int64_t in = int64_t(c.in_channels) * c.patch_size * c.patch_size;
  const int64_t out = int64_t(c.out_channels) * c.patch_size * c.patch_size;
  // Two-layer MLP embedders of 256 sinusoidal channels (timestep, guidance) and of the pooled
  // text embedding.
  const int64_t mlp_256 = 256 * d + d + d * d + d;
  int64_t n = in * d + d                                              // x_embedder
              + int64_t(c.joint_attention_dim) * d + d                // context_embedder
              + mlp_256 * (c.guidance_embeds ? 2 : 1)                 // timestep (+ guidance)
              + int64_t(c.pooled_projection_dim) * d + d + d * d + d  // text_embedder
              + d * 2 * d + 2 * d                                     // norm_out.linear
              + d * out + out;                                        // proj_out
  n += int64_t(c.num_layers) * (36 * d * d + 30 * d + 4 * h);
  n += int64_t(c.num_single_layers) * (15 * d * d + 11 * d + 2 * h);
  return n;
}

int64_t FluxLoraParameterCount(const flux::FluxConfig& c, int64_t rank, bool all_linears) {
  const int64_t d = c.inner_dim();
  const int64_t per_double = all_linears ? 50 : 36, per_single = all_linears ? 21 : 6;
  return (int64_t(c.num_layers) * per_double + int64_t(c.num_single_layers) * per_single) * d *
         rank;
}

int64_t T5ParameterCount(const text::T5Config& c) {
  const int64_t d = c.d_model, inner = c.inner_dim(), ff = c.d_ff;
  return c.vocab_size * d + c.relative_attention_num_buckets * c.num_heads + d +
         c.num_layers * (4 * d * inner + 3 * d * ff + 2 * d);
}

MemoryEstimate EstimateFluxMemory(const FluxMemoryJob& job, const LoraSdParams& params) {
  const flux::FluxConfig& c = job.transformer;
  MemoryEstimate e;
  const bool half =
      params.mixed_precision == "bf16" || (params.mixed_precision == "fp16" && job.cuda);
  const double weight_bytes = params.base_precision == "fp8" ? 1 : half ? 2 : 4;
  const double act_bytes = half ? 3 : 4;  // autocast: half tensors and fp32 upcasts, as UNet's
  const double n = double(FluxParameterCount(c));
  e.denoiser_weights = n * weight_bytes;
  e.load_copy = !job.cuda && !half && weight_bytes == 4 ? 0 : n * 2;  // read as bf16 at most
  e.lora = double(FluxLoraParameterCount(c, params.rank, params.lora_targets == "all")) * 16;

  const double d = double(c.inner_dim()), heads = double(c.num_attention_heads);
  const double l = double(job.image_tokens + job.text_tokens);
  const double blocks = double(c.num_layers + c.num_single_layers);
  const double scores = job.fused_attention ? 0 : 2 * heads * l * l;
  const double one_block = 20 * l * d + scores;
  const double per_sample = params.gradient_checkpointing ? blocks * l * d + 2 * one_block
                                                          : blocks * one_block + one_block;
  const double batch = double(params.batch_size) * (job.prior ? 2 : 1);
  e.activations = batch * per_sample * act_bytes;

  if (job.encoders) {
    e.encoders = double(T5ParameterCount(job.t5) + ClipTextParameterCount(job.clip) +
                        VaeParameterCount(job.vae)) *
                 4;
  }
  // Samples: one pass without gradients keeps about one block's tensors (no CFG batch), then the
  // VAE decoder's widest level at full size.
  const auto sres = params.samples.find("sample_resolution");
  if (sres != params.samples.end() && sres->is_number_integer()) {
    const double s = double(sres->get<int64_t>());
    const double tokens = (s / 16) * (s / 16) + double(job.text_tokens);
    const double pass =
        (12 * tokens * d + (job.fused_attention ? 0 : heads * tokens * tokens)) * act_bytes;
    const double decode =
        job.encoders ? 4 * double(job.vae.block_out_channels.front()) * s * s * 4 : 0;
    e.sampling = std::max(pass, decode);
  }
  FinishEstimate(job.cuda, &e);
  return e;
}

}  // namespace gleaner::train::training
