#include "agent/train/training/memory_estimate.h"

#include <algorithm>
#include <cstdio>

namespace gleaner::train::training {
namespace {

// Parameter counts of the layers the models are built from (weights + biases).
double Conv(double in, double out, double k) {
  return in * out * k * k + out;
}
double Linear(double in, double out, bool bias = true) {
  return in * out + (bias ? out : 0);
}
double Norm(double ch) {
  return 2 * ch;
}

// UNet resnet (unet_blocks.cc: Resnet).
double UNetResnet(const UNetConfig& c, double in, double out) {
  double p =
      Norm(in) + Conv(in, out, 3) + Linear(c.time_embed_dim(), out) + Norm(out) + Conv(out, out, 3);
  if (in != out) p += Conv(in, out, 1);
  return p;
}

// One TransformerBlock: self- and cross-attention (to_q/k/v without bias, to_out with), GEGLU.
double TransformerBlockParams(double dim, double inner, double context) {
  double attn1 = 3 * Linear(dim, inner, false) + Linear(inner, dim);
  double attn2 = Linear(dim, inner, false) + 2 * Linear(context, inner, false) + Linear(inner, dim);
  double ff = Linear(dim, dim * 8) + Linear(dim * 4, dim);
  return 3 * Norm(dim) + attn1 + attn2 + ff;
}

double Inner(int64_t dim, int64_t heads) {
  return heads > 0 ? double(heads * (dim / heads)) : double(dim);
}

double Transformer2DParams(const UNetConfig& c, double ch, int64_t heads, int64_t layers) {
  double proj = Linear(ch, ch);  // a 1x1 conv has as many
  return Norm(ch) + 2 * proj +
         double(layers) *
             TransformerBlockParams(ch, Inner(int64_t(ch), heads), c.cross_attention_dim);
}

// LoRA parameters of one transformer block at rank r: A [r,in] and B [out,r] per projection.
double TransformerBlockLora(double dim, double inner, double context, double r) {
  double self = 3 * r * (dim + inner) + r * (inner + dim);
  double cross = r * (dim + inner) + 2 * r * (context + inner) + r * (inner + dim);
  return self + cross;
}

// Calls f(channels, heads, transformer layers, latent scale) for every Transformer2D of the
// UNet (scale: 1 at the top level, 2 one level down, ...), and g(in, out, scale) for every resnet.
template <class F, class G>
void ForEachLayer(const UNetConfig& c, F f, G g) {
  const size_t n = c.block_out_channels.size();
  for (size_t i = 0; i < n; ++i) {
    const double scale = double(int64_t(1) << i);
    const bool attn = c.down_block_types[i] == "CrossAttnDownBlock2D";
    const int64_t out = c.block_out_channels[i], in0 = c.block_out_channels[i == 0 ? 0 : i - 1];
    for (int j = 0; j < c.layers_per_block[i]; ++j) {
      g(double(j == 0 ? in0 : out), double(out), scale);
      if (attn) f(double(out), c.num_heads[i], c.down_transformer_layers[i][j], scale);
    }
  }
  const int64_t last = c.block_out_channels[n - 1];
  const double deepest = double(int64_t(1) << (n - 1));
  g(double(last), double(last), deepest);
  f(double(last), c.num_heads[n - 1], c.down_transformer_layers[n - 1][0], deepest);
  g(double(last), double(last), deepest);
  for (size_t i = 0; i < n; ++i) {
    const size_t r = n - 1 - i;
    const double scale = double(int64_t(1) << r);
    const int64_t out = c.block_out_channels[r];
    const int64_t in = c.block_out_channels[r == 0 ? 0 : r - 1];
    const int64_t prev_out = c.block_out_channels[i == 0 ? n - 1 : n - i];
    const int layers = c.layers_per_block[r] + 1;
    const bool attn = c.up_block_types[i] == "CrossAttnUpBlock2D";
    for (int j = 0; j < layers; ++j) {
      const int64_t skip = j == layers - 1 ? in : out;
      const int64_t res_in = j == 0 ? prev_out : out;
      g(double(res_in + skip), double(out), scale);
      if (attn) f(double(out), c.num_heads[r], c.up_transformer_layers[i][j], scale);
    }
  }
}

double VaeResnet(double in, double out) {
  double p = Norm(in) + Conv(in, out, 3) + Norm(out) + Conv(out, out, 3);
  if (in != out) p += Conv(in, out, 1);
  return p;
}

double VaeMid(const vae::VaeConfig& c, double ch) {
  double p = 2 * VaeResnet(ch, ch);
  if (c.mid_block_add_attention) p += Norm(ch) + 4 * Linear(ch, ch);
  return p;
}

// Elements one training micro-batch keeps per sample for one resnet (in -> out at L pixels):
// the input, GroupNorm and SiLU outputs, both convolutions, the time-embedding sum, the
// residual.
double ResnetActivations(double in, double out, double pixels) {
  return (3 * in + 5 * out) * pixels;
}

// Per sample for one TransformerBlock at L tokens of `dim` channels with T text tokens: norms,
// projections, attention outputs and residuals, GEGLU's 8C/4C/4C, and the attention
// probabilities (scores and softmax) when the explicit kernel holds them.
double TransformerActivations(double dim, double heads, double tokens, double text, bool fused) {
  double p = 31 * dim * tokens + 2 * dim * text;
  if (!fused) p += 2 * heads * tokens * (tokens + text);
  return p;
}

// Elements at inference for the same layer (no saved activations: the largest live set).
double TransformerInference(double dim, double heads, double tokens, double text, bool fused) {
  double p = 14 * dim * tokens;  // input, residual, GEGLU's 8C + 4C
  if (!fused) p += 2 * heads * tokens * std::max(tokens, text);
  return p;
}

double GiB(double bytes) {
  return bytes / double(int64_t(1) << 30);
}

}  // namespace

int64_t UNetParameterCount(const UNetConfig& c) {
  const size_t n = c.block_out_channels.size();
  const double ch0 = c.block_out_channels[0], temb = c.time_embed_dim();
  double p = Conv(c.in_channels, ch0, 3) + Linear(ch0, temb) + Linear(temb, temb);
  if (c.has_text_time())
    p += Linear(c.projection_class_embeddings_input_dim, temb) + Linear(temb, temb);
  ForEachLayer(
      c,
      [&](double ch, int64_t heads, int64_t layers, double) {
        p += Transformer2DParams(c, ch, heads, layers);
      },
      [&](double in, double out, double) { p += UNetResnet(c, in, out); });
  for (size_t i = 0; i + 1 < n; ++i) {  // downsamplers and upsamplers: one 3x3 conv each
    const double ch = c.block_out_channels[i], up = c.block_out_channels[n - 1 - i];
    p += Conv(ch, ch, 3) + Conv(up, up, 3);
  }
  p += Norm(ch0) + Conv(ch0, c.out_channels, 3);
  return int64_t(p);
}

int64_t UNetLoraParameterCount(const UNetConfig& c, int64_t rank) {
  double p = 0;
  ForEachLayer(
      c,
      [&](double ch, int64_t heads, int64_t layers, double) {
        p += double(layers) * TransformerBlockLora(ch, Inner(int64_t(ch), heads),
                                                   c.cross_attention_dim, double(rank));
      },
      [](double, double, double) {});
  return int64_t(p);
}

int64_t VaeParameterCount(const vae::VaeConfig& c) {
  const std::vector<int>& ch = c.block_out_channels;
  const size_t n = ch.size();
  const double lat = c.latent_channels;
  double enc = Conv(c.in_channels, ch[0], 3);
  for (size_t i = 0; i < n; ++i) {
    double in = ch[i == 0 ? 0 : i - 1];
    for (int j = 0; j < c.layers_per_block; ++j) enc += VaeResnet(j == 0 ? in : ch[i], ch[i]);
    if (i + 1 < n) enc += Conv(ch[i], ch[i], 3);
  }
  enc += VaeMid(c, ch[n - 1]) + Norm(ch[n - 1]) + Conv(ch[n - 1], 2 * lat, 3);
  double dec = Conv(lat, ch[n - 1], 3) + VaeMid(c, ch[n - 1]);
  for (size_t i = 0; i < n; ++i) {
    const size_t r = n - 1 - i;
    double in = ch[i == 0 ? n - 1 : r + 1];
    for (int j = 0; j < c.layers_per_block + 1; ++j) dec += VaeResnet(j == 0 ? in : ch[r], ch[r]);
    if (i + 1 < n) dec += Conv(ch[r], ch[r], 3);
  }
  dec += Norm(ch[0]) + Conv(ch[0], c.out_channels, 3);
  double p = enc + dec;
  if (c.use_quant_conv) p += Conv(2 * lat, 2 * lat, 1);
  if (c.use_post_quant_conv) p += Conv(lat, lat, 1);
  return int64_t(p);
}

int64_t ClipTextParameterCount(const text::ClipTextConfig& c) {
  const double h = double(c.hidden_size), i = double(c.intermediate_size);
  double layer = 2 * Norm(h) + 4 * Linear(h, h) + Linear(h, i) + Linear(i, h);
  double p = double(c.vocab_size) * h + double(c.max_position_embeddings) * h +
             double(c.num_hidden_layers) * layer + Norm(h);
  if (c.with_projection) p += Linear(h, double(c.projection_dim), false);
  return int64_t(p);
}

MemoryEstimate EstimateMemory(const MemoryJob& job, const LoraSdParams& params) {
  const UNetConfig& c = job.unet;
  MemoryEstimate e;
  // Placement (unet.h): bf16 anywhere, fp16 on CUDA; else fp32. Activations under autocast are
  // a mix of half-precision tensors and fp32 ones (GroupNorm, softmax upcasts): 3 bytes each on
  // average is the honest middle; fp32 runs keep 4.
  const bool half =
      params.mixed_precision == "bf16" || (params.mixed_precision == "fp16" && job.cuda);
  const double weight_bytes = half ? 2 : 4, act_bytes = half ? 3 : 4;
  const double unet_params = double(UNetParameterCount(c));
  e.denoiser_weights = unet_params * weight_bytes;
  // The weights as read (fp32) live beside the placed UNet until it is built; on an fp32 CPU run
  // the placed tensors are the read ones (no copy).
  e.load_copy = !job.cuda && !half ? 0 : unet_params * 4;
  // LoRA: fp32 A/B, gradient, AdamW's m and v.
  double lora_params = double(UNetLoraParameterCount(c, params.rank));
  if (params.train_text_encoder) {
    for (const text::ClipTextConfig& t : job.text) {
      lora_params +=
          double(t.num_hidden_layers) * 4 * double(params.rank) * 2 * double(t.hidden_size);
    }
  }
  e.lora = lora_params * 16;

  // Training activations of one micro-batch.
  const double batch = double(params.batch_size) * (job.prior ? 2 : 1);
  const double top = double(job.latent_height) * double(job.latent_width);
  const double text = double(job.text_tokens);
  double kept = 0, largest_layer = 0, inputs = 0;
  ForEachLayer(
      c,
      [&](double ch, int64_t heads, int64_t layers, double scale) {
        const double tokens = top / (scale * scale);
        const double one =
            TransformerActivations(ch, double(heads), tokens, text, job.fused_attention) +
            8 * double(params.rank) * tokens;
        kept += 4 * ch * tokens + double(layers) * one;  // Transformer2D's norm/proj + blocks
        inputs += 4 * ch * tokens + double(layers) * ch * tokens;
        largest_layer = std::max(largest_layer, one);
      },
      [&](double in, double out, double scale) {
        const double pixels = top / (scale * scale);
        const double one = ResnetActivations(in, out, pixels);
        kept += one;
        inputs += in * pixels;
        largest_layer = std::max(largest_layer, one);
      });
  // Backward: the gradients of the largest layer's tensors live beside what is kept, and with
  // checkpointing that layer is recomputed (its activations exist again, once).
  double per_sample =
      params.gradient_checkpointing ? inputs + 2 * largest_layer : kept + largest_layer;
  if (params.train_text_encoder) {
    for (const text::ClipTextConfig& t : job.text) {
      const double h = double(t.hidden_size), i = double(t.intermediate_size);
      per_sample += double(t.num_hidden_layers) * (10 * h * text + 2 * i * text +
                                                   2 * double(t.num_attention_heads) * text * text);
    }
  }
  e.activations = batch * per_sample * act_bytes;

  // Encoders (fp32) and encoding the photos one at a time.
  const int f = job.has_vae ? job.vae.spatial_factor() : 8;
  if (job.has_vae) e.encoders += double(VaeParameterCount(job.vae)) * 4;
  for (const text::ClipTextConfig& t : job.text) {
    e.encoders += double(ClipTextParameterCount(t)) * 4;
  }
  // A VAE pass at an image of `pixels`: the widest level's few live tensors, and the mid
  // block's single-head attention over the latent pixels (unless fused).
  auto vae_pass = [&](double pixels) {
    if (!job.has_vae) return 0.0;
    const double ch0 = job.vae.block_out_channels.front();
    const double latent = pixels / double(f * f);
    double p = 4 * ch0 * pixels + 3 * double(job.vae.in_channels) * pixels;
    if (job.vae.mid_block_add_attention && !job.fused_attention) p += 2 * latent * latent;
    return p * 4;
  };
  double encode = 0;
  if (job.encode_images) encode = vae_pass(top * double(f * f));

  // Samples: the UNet's largest inference layer with classifier-free guidance (batch 2), the
  // skips, then the VAE decoder at full size.
  const auto sres = params.samples.find("sample_resolution");
  if (sres != params.samples.end() && sres->is_number_integer()) {
    const double s = double(sres->get<int64_t>());
    const double stop = (s / f) * (s / f);
    double largest = 0, skips = 0;
    ForEachLayer(
        c,
        [&](double ch, int64_t heads, int64_t, double scale) {
          const double tokens = stop / (scale * scale);
          largest = std::max(
              largest, TransformerInference(ch, double(heads), tokens, text, job.fused_attention));
        },
        [&](double in, double out, double scale) {
          const double pixels = stop / (scale * scale);
          largest = std::max(largest, (2 * in + 2 * out) * pixels);
          skips += out * pixels;
        });
    const double unet = 2 * (largest + skips) * act_bytes;
    e.sampling = std::max(unet, vae_pass(s * s));
  }
  e.sampling = std::max(e.sampling, encode);

  FinishEstimate(job.cuda, &e);
  return e;
}

void FinishEstimate(bool cuda, MemoryEstimate* e) {
  // The peak: fixed parts plus the largest of the phases that come one after another.
  const double phase = std::max({e->activations, e->sampling, e->load_copy});
  e->dominant = phase == e->activations ? "activations"
                : phase == e->sampling  ? "sampling"
                                        : "load";
  if (!cuda) {
    e->runtime = kHostRuntimeBytes;
    e->device_peak = e->runtime + e->denoiser_weights + e->lora + e->encoders + phase;
    e->host_peak = e->device_peak;
  } else {
    // The host reads the weights and holds the encoders until they move; the GPU trains.
    e->runtime = kCudaRuntimeBytes;
    e->device_peak = e->runtime + e->denoiser_weights + e->lora + e->encoders +
                     std::max(e->activations, e->sampling);
    e->host_peak = kHostRuntimeBytes + e->load_copy + e->encoders;
  }
}

Status CheckMemory(const MemoryEstimate& e, bool cuda, const LoraSdParams& params,
                   int64_t host_budget_bytes, int64_t device_budget_bytes) {
  auto over = [](double need, int64_t budget) {
    return budget > 0 && need * kMemoryCheckMargin > double(budget);
  };
  const bool device_over = cuda && over(e.device_peak, device_budget_bytes);
  const bool host_over = over(e.host_peak, host_budget_bytes);
  if (!device_over && !host_over) return Status::Ok();
  const double need = device_over ? e.device_peak : e.host_peak;
  const double have = double(device_over ? device_budget_bytes : host_budget_bytes);
  const char* what = device_over ? "VRAM" : "RAM";
  std::string advice;
  if (e.dominant == "activations" && device_over == cuda) {
    if (params.batch_size > 1) {
      advice = "lower batch_size (" + std::to_string(params.batch_size) + ")";
      if (!params.gradient_checkpointing) advice += " or set gradient_checkpointing";
    } else if (!params.gradient_checkpointing) {
      advice = "set gradient_checkpointing";
    } else if (params.mixed_precision == "no") {
      advice = "set mixed_precision (bf16 or fp16)";
    } else {
      advice = "train at a lower resolution (the model's sample_size or the dataset's latents)";
    }
  } else if (e.dominant == "sampling") {
    advice = "lower sample_resolution (" +
             std::to_string(params.samples.value("sample_resolution", int64_t(0))) + ")";
  } else if (e.lora > e.denoiser_weights && params.rank > 1) {
    advice = "lower rank (" + std::to_string(params.rank) + ")";
  } else if (params.mixed_precision == "no" && cuda) {
    advice = "set mixed_precision (bf16 or fp16)";
  } else {
    advice = "this base model is too large for this node";
  }
  char line[256];
  std::snprintf(line, sizeof line,
                "memory: this job needs about %.1f GiB of %s and the node allows %.1f GiB: %s",
                GiB(need * kMemoryCheckMargin), what, GiB(have), advice.c_str());
  return Status::Invalid(line);
}

}  // namespace gleaner::train::training
