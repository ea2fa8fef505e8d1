#include "shared/job_params.h"

#include <algorithm>

#include "shared/unet_limits.h"

namespace gleaner {
namespace {

// Reads an optional string that must be one of `allowed` (null-terminated list); *out holds the
// default on entry.
bool Enum(FieldReader& r, const char* key, const char* const* allowed, std::string* out) {
  std::string v = *out;
  if (!r.String(key, &v, false, 64)) return false;
  for (const char* const* a = allowed; *a != nullptr; ++a) {
    if (v == *a) {
      *out = v;
      return true;
    }
  }
  std::string list;
  for (const char* const* a = allowed; *a != nullptr; ++a) {
    list += (list.empty() ? "" : ", ") + std::string(*a);
  }
  return r.Fail(std::string("params.") + key + " must be one of: " + list);
}

// The upper bounds of the memory-deciding params (job_params.h), from what a 24 GB card holds.
// Fixed costs on such a card with the largest supported model, SDXL (2.57e9 UNet parameters):
// the frozen UNet in fp16 is 5.1 GB and its two text encoders (8.2e8 parameters, fp32) 3.3 GB,
// which leaves about 15 GB for LoRA, activations and sampling.
//  - rank <= 256: SDXL's attention projections take 1.45e6 LoRA parameters per unit of rank
//    (sum over its 70 transformer blocks of 14·C + 2·2048 at C = 640 and 1280), each with an
//    fp32 value, gradient and two AdamW moments (16 bytes): rank 256 is 3.7e8 parameters, 5.9 GB;
//    rank 1024 would be 24 GB for the adapters alone. (SD 1.5: 2.0e5 per rank, 0.8 GB at 256.)
//  - batch_size <= 64: SD 1.5's smallest useful training size is 256 px (32x32 latents); with
//    gradient checkpointing and bf16 one sample keeps about 0.21 GB of activations there (0.11 GB
//    with a fused attention kernel; training/memory_estimate.cc), so beside its 1.7 GB of weights
//    a 24 GB card holds about 100 samples; 64 leaves the allocator its slack. Larger effective
//    batches take gradient_accumulation (time, not memory).
//  - sample_resolution <= 2048: a sample ends in the VAE decoder at full size, whose top level
//    holds about four 128-channel fp32 tensors of the image's size: at 2048 px that is
//    4 · 128 · 2048² · 4 bytes = 8.6 GB, which fits beside SDXL's 8.4 GB of weights; at 4096 px
//    it is 34 GB, more than the card, whatever the attention kernel. Within the bound the
//    explicit attention kernel can still need more (its scores grow with the square of the
//    token count): a node checks the job against its own memory before it starts.
// steps, sample_steps and gradient_accumulation cost time, not memory: their bounds stay wide.
bool IntField(FieldReader& r, const char* key, int64_t min, int64_t max, int64_t def, Json* out) {
  int64_t v = def;
  if (!r.Int(key, &v, false, min, max)) return false;
  (*out)[key] = v;
  return true;
}

bool NumField(FieldReader& r, const char* key, double min, double max, double def, Json* out) {
  double v = def;
  if (!r.Number(key, &v, false, min, max)) return false;
  (*out)[key] = v;
  return true;
}

// Sample fields, shared by every kind. All absent: no samples, and nothing is added to `out`.
// With sample_prompts (1..kMaxSamplePrompts strings or {prompt, negative_prompt} objects) every
// other sample field is defaulted; without it the others are refused, so a typo cannot silently
// turn sampling off.
// guidance_scale: classifier-free guidance of SD samples (7.5), or the embedded guidance FLUX.1-dev
// samples take as an input (3.5, FluxPipeline's default).
bool SampleFields(FieldReader& r, const Json& params, int64_t steps, int64_t checkpoint_every,
                  int64_t seed, Json* out, double guidance_default = 7.5) {
  static const char* const kOthers[] = {"sample_every", "sample_steps",      "guidance_scale",
                                        "sample_seed",  "sample_resolution", nullptr};
  if (!r.Has("sample_prompts")) {
    for (const char* const* k = kOthers; *k != nullptr; ++k) {
      if (r.Has(*k)) return r.Fail(std::string("params.") + *k + " needs params.sample_prompts");
    }
    return true;
  }
  const Json& list = params["sample_prompts"];
  if (!list.is_array() || list.empty() || list.size() > size_t(kMaxSamplePrompts)) {
    return r.Fail("params.sample_prompts must be an array of 1 to " +
                  std::to_string(kMaxSamplePrompts) +
                  " prompts (strings or {prompt, negative_prompt} objects)");
  }
  Json prompts = Json::array();
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string name = "params.sample_prompts[" + std::to_string(i) + "]";
    std::string prompt, negative;
    if (list[i].is_string()) {
      prompt = list[i].get<std::string>();
    } else if (list[i].is_object()) {
      static const char* const kPromptKeys[] = {"prompt", "negative_prompt", nullptr};
      FieldReader pr(list[i], name + ".");
      pr.OnlyKeys(kPromptKeys);
      pr.String("prompt", &prompt, true, kMaxSamplePromptChars);
      pr.String("negative_prompt", &negative, false, kMaxSamplePromptChars);
      if (!pr.ok()) return r.Fail(pr.status().message());
    } else {
      return r.Fail(name + " must be a string or a {prompt, negative_prompt} object");
    }
    if (prompt.empty() || prompt.size() > size_t(kMaxSamplePromptChars) ||
        negative.size() > size_t(kMaxSamplePromptChars)) {
      return r.Fail(name + ": a prompt must be 1 to " + std::to_string(kMaxSamplePromptChars) +
                    " bytes, a negative prompt at most that");
    }
    prompts.push_back({{"prompt", prompt}, {"negative_prompt", negative}});
  }
  (*out)["sample_prompts"] = prompts;
  IntField(r, "sample_every", 1, steps, checkpoint_every, out);
  IntField(r, "sample_steps", 1, 1000, 25, out);
  NumField(r, "guidance_scale", 0, 100, guidance_default, out);
  IntField(r, "sample_seed", 0, kMaxSafeInteger, seed, out);
  int64_t res = 512;
  if (r.Int("sample_resolution", &res, false, 8, kMaxSampleResolution) && res % 8 != 0) {
    return r.Fail("params.sample_resolution must be a multiple of 8 in [8, " +
                  std::to_string(kMaxSampleResolution) + "]");
  }
  (*out)["sample_resolution"] = res;
  return r.ok();
}

Result<Json> Synthetic(const Json& params) {
  static const char* const kKeys[] = {
      "steps",          "step_ms",     "checkpoint_every",  "seed",         "fail_at_step",
      "crash_at_step",  "sample_ms",   "sample_prompts",    "sample_every", "sample_steps",
      "guidance_scale", "sample_seed", "sample_resolution", nullptr};
  FieldReader r(params, "params.");
  r.OnlyKeys(kKeys);
  int64_t steps = 0;
  r.Int("steps", &steps, true, 1, kMaxJobSteps);
  if (!r.ok()) return r.status();
  Json out = Json::object();
  out["steps"] = steps;
  IntField(r, "step_ms", 0, 60000, 0, &out);
  IntField(r, "checkpoint_every", 1, steps, std::min<int64_t>(100, steps), &out);
  IntField(r, "seed", 0, kMaxSafeInteger, 0, &out);
  for (const char* opt : {"fail_at_step", "crash_at_step"}) {
    int64_t v = 0;
    if (r.Has(opt) && r.Int(opt, &v, true, 1, steps)) out[opt] = v;
  }
  if (!r.ok()) return r.status();
  SampleFields(r, params, steps, out["checkpoint_every"].get<int64_t>(), out["seed"].get<int64_t>(),
               &out);
  // Test hook: time spent per sample image, so tests can interrupt sampling.
  if (r.ok() && r.Has("sample_ms")) {
    if (!out.contains("sample_prompts"))
      return Status::Invalid("params.sample_ms needs params.sample_prompts");
    IntField(r, "sample_ms", 0, 60000, 0, &out);
  }
  if (!r.ok()) return r.status();
  return out;
}

}  // namespace

namespace {

// The fields of one family only (job_params.h).
const char* const kSdOnly[] = {"prediction_type", "snr_gamma", "noise_offset", nullptr};
const char* const kFluxOnly[] = {
    "weighting_scheme",    "logit_mean", "logit_std",           "mode_scale",   "timestep_shift",
    "discrete_flow_shift", "guidance",   "max_sequence_length", "lora_targets", nullptr};

Status RefuseOtherFamily(const Json& params, ModelFamily family) {
  const char* const* other = family == ModelFamily::kFlux ? kSdOnly : kFluxOnly;
  for (const char* const* k = other; *k != nullptr; ++k) {
    if (!params.contains(*k)) continue;
    if (family == ModelFamily::kFlux) {
      return Status::Invalid(std::string("params.") + *k +
                             " does not apply to a FLUX model (flow matching; see "
                             "weighting_scheme, timestep_shift and guidance)");
    }
    return Status::Invalid(std::string("params.") + *k +
                           " applies to FLUX models only (this job's model is an SD/SDXL UNet)");
  }
  return Status::Ok();
}

}  // namespace

bool IsKnownJobKind(const std::string& kind) {
  return kind == "synthetic" || kind == "lora-sd";
}

bool JobKindNeedsInputs(const std::string& kind) {
  return kind == "lora-sd";
}

Result<LoraSdParams> LoraSdParams::Parse(const Json& params, ModelFamily family) {
  static const char* const kKeys[] = {"steps",
                                      "batch_size",
                                      "learning_rate",
                                      "rank",
                                      "alpha",
                                      "seed",
                                      "checkpoint_every",
                                      "mixed_precision",
                                      "base_precision",
                                      "gradient_checkpointing",
                                      "gradient_accumulation",
                                      "lr_scheduler",
                                      "warmup_steps",
                                      "prediction_type",
                                      "prior_loss_weight",
                                      "snr_gamma",
                                      "noise_offset",
                                      "max_grad_norm",
                                      "adam_beta1",
                                      "adam_beta2",
                                      "adam_weight_decay",
                                      "adam_epsilon",
                                      "instance_prompt",
                                      "class_prompt",
                                      "num_class_images",
                                      "train_text_encoder",
                                      "text_encoder_lr",
                                      "sample_prompts",
                                      "sample_every",
                                      "sample_steps",
                                      "guidance_scale",
                                      "sample_seed",
                                      "sample_resolution",
                                      "weighting_scheme",
                                      "logit_mean",
                                      "logit_std",
                                      "mode_scale",
                                      "timestep_shift",
                                      "discrete_flow_shift",
                                      "guidance",
                                      "max_sequence_length",
                                      "lora_targets",
                                      "resolution",
                                      nullptr};
  static const char* const kPrecision[] = {"no", "fp16", "bf16", nullptr};
  static const char* const kBasePrecision[] = {"auto", "fp8", nullptr};
  static const char* const kSchedulers[] = {"constant", "constant_with_warmup", "linear", "cosine",
                                            nullptr};
  static const char* const kPrediction[] = {"epsilon", "v_prediction", nullptr};
  static const char* const kWeighting[] = {"none", "sigma_sqrt", "logit_normal",
                                           "mode", "cosmap",     nullptr};
  static const char* const kShift[] = {"none", "static", "resolution", nullptr};
  static const char* const kTargets[] = {"default", "all", nullptr};
  if (!params.is_object()) return Status::Invalid("params must be a JSON object");
  LoraSdParams p;
  p.family = family;
  FieldReader r(params, "params.");
  r.OnlyKeys(kKeys);
  if (!r.ok()) return r.status();
  GLEANER_RETURN_IF_ERROR(RefuseOtherFamily(params, family));
  r.Int("steps", &p.steps, true, 1, kMaxJobSteps);
  if (!r.ok()) return r.status();
  r.Int("batch_size", &p.batch_size, false, 1, kMaxBatchSize);
  r.Number("learning_rate", &p.learning_rate, false, 1e-12, 1.0);
  r.Int("rank", &p.rank, false, 1, kMaxLoraRank);
  if (!r.ok()) return r.status();
  p.alpha = double(p.rank);
  r.Number("alpha", &p.alpha, false, 1e-6, 1e6);
  r.Int("seed", &p.seed, false, 0, kMaxSafeInteger);
  p.checkpoint_every = std::min<int64_t>(100, p.steps);
  r.Int("checkpoint_every", &p.checkpoint_every, false, 1, p.steps);
  Enum(r, "mixed_precision", kPrecision, &p.mixed_precision);
  Enum(r, "base_precision", kBasePrecision, &p.base_precision);
  r.Bool("gradient_checkpointing", &p.gradient_checkpointing, false);
  r.Int("gradient_accumulation", &p.gradient_accumulation, false, 1, 1024);
  Enum(r, "lr_scheduler", kSchedulers, &p.lr_scheduler);
  r.Int("warmup_steps", &p.warmup_steps, false, 0, p.steps);
  Enum(r, "prediction_type", kPrediction, &p.prediction_type);
  r.Number("prior_loss_weight", &p.prior_loss_weight, false, 0, 1000);
  r.Number("snr_gamma", &p.snr_gamma, false, 0, 1000);
  r.Number("noise_offset", &p.noise_offset, false, 0, 1);
  Enum(r, "weighting_scheme", kWeighting, &p.weighting_scheme);
  r.Number("logit_mean", &p.logit_mean, false, -10, 10);
  r.Number("logit_std", &p.logit_std, false, 0.01, 10);
  r.Number("mode_scale", &p.mode_scale, false, 0, 10);
  Enum(r, "timestep_shift", kShift, &p.timestep_shift);
  r.Number("discrete_flow_shift", &p.discrete_flow_shift, false, 0.01, 100);
  r.Number("guidance", &p.guidance, false, 0, 100);
  r.Int("max_sequence_length", &p.max_sequence_length, false, 1, 512);
  Enum(r, "lora_targets", kTargets, &p.lora_targets);
  r.Number("max_grad_norm", &p.max_grad_norm, false, 0, 1e6);
  r.Number("adam_beta1", &p.adam_beta1, false, 0, 0.999999);
  r.Number("adam_beta2", &p.adam_beta2, false, 0, 0.999999999);
  r.Number("adam_weight_decay", &p.adam_weight_decay, false, 0, 10);
  r.Number("adam_epsilon", &p.adam_epsilon, false, 1e-20, 1);
  // Image datasets (optional; kept only when given): the captions of images without a .txt.
  r.String("instance_prompt", &p.instance_prompt, false, 4096);
  r.String("class_prompt", &p.class_prompt, false, 4096);
  r.Int("num_class_images", &p.num_class_images, false, 1, kMaxClassImages);
  if (r.Int("resolution", &p.resolution, false, 64, 4096) && p.resolution % 64 != 0) {
    return Status::Invalid("params.resolution must be a multiple of 64 in [64, 4096]");
  }
  if (r.ok() && p.num_class_images > 0 && p.class_prompt.empty()) {
    return Status::Invalid(
        "params.num_class_images needs params.class_prompt (the prompt missing class images are "
        "generated from)");
  }
  p.has_train_text_encoder =
      r.Bool("train_text_encoder", &p.train_text_encoder, false) && r.Has("train_text_encoder");
  if (r.ok() && family == ModelFamily::kFlux && p.train_text_encoder) {
    return Status::Invalid(
        "params.train_text_encoder is not supported for FLUX models yet (LoRA trains the "
        "transformer only)");
  }
  p.text_encoder_lr = p.learning_rate;
  p.has_text_encoder_lr = r.Number("text_encoder_lr", &p.text_encoder_lr, false, 1e-12, 1.0) &&
                          r.Has("text_encoder_lr");
  if (!r.ok()) return r.status();
  SampleFields(r, params, p.steps, p.checkpoint_every, p.seed, &p.samples,
               family == ModelFamily::kFlux ? 3.5 : 7.5);
  if (!r.ok()) return r.status();
  return p;
}

Json LoraSdParams::ToJson() const {
  Json out{{"steps", steps},
           {"batch_size", batch_size},
           {"learning_rate", learning_rate},
           {"rank", rank},
           {"alpha", alpha},
           {"seed", seed},
           {"checkpoint_every", checkpoint_every},
           {"mixed_precision", mixed_precision},
           {"gradient_checkpointing", gradient_checkpointing},
           {"gradient_accumulation", gradient_accumulation},
           {"lr_scheduler", lr_scheduler},
           {"warmup_steps", warmup_steps},
           {"prior_loss_weight", prior_loss_weight},
           {"max_grad_norm", max_grad_norm},
           {"adam_beta1", adam_beta1},
           {"adam_beta2", adam_beta2},
           {"adam_weight_decay", adam_weight_decay},
           {"adam_epsilon", adam_epsilon}};
  if (family == ModelFamily::kFlux) {
    out["weighting_scheme"] = weighting_scheme;
    out["logit_mean"] = logit_mean;
    out["logit_std"] = logit_std;
    out["mode_scale"] = mode_scale;
    out["timestep_shift"] = timestep_shift;
    out["discrete_flow_shift"] = discrete_flow_shift;
    out["guidance"] = guidance;
    out["max_sequence_length"] = max_sequence_length;
    out["lora_targets"] = lora_targets;
  } else {
    out["prediction_type"] = prediction_type;
    out["snr_gamma"] = snr_gamma;
    out["noise_offset"] = noise_offset;
  }
  if (base_precision != "auto") out["base_precision"] = base_precision;
  if (!instance_prompt.empty()) out["instance_prompt"] = instance_prompt;
  if (!class_prompt.empty()) out["class_prompt"] = class_prompt;
  if (num_class_images > 0) out["num_class_images"] = num_class_images;
  if (resolution > 0) out["resolution"] = resolution;
  if (has_train_text_encoder) out["train_text_encoder"] = train_text_encoder;
  if (has_text_encoder_lr) out["text_encoder_lr"] = text_encoder_lr;
  for (const auto& field : samples.items()) out[field.key()] = field.value();
  return out;
}

Result<Json> NormalizeParams(const std::string& kind, const Json& params, ModelFamily family) {
  if (!params.is_object()) return Status::Invalid("params must be a JSON object");
  if (kind == "synthetic") return Synthetic(params);
  if (kind == "lora-sd") {
    Result<LoraSdParams> p = LoraSdParams::Parse(params, family);
    if (!p.ok()) return p.status();
    return p->ToJson();
  }
  return Status::Invalid("unknown job kind '" + kind + "' (known: synthetic, lora-sd)");
}

Status CheckUnetConfig(const Json& config, const std::string& prefix) {
  if (!config.is_object() || config.empty()) {
    return Status::Invalid(prefix + " must be a non-empty JSON object (a diffusers UNet config)");
  }
  auto it = config.find("block_out_channels");
  if (it == config.end() || !it->is_array() || it->empty()) {
    return Status::Invalid(prefix +
                           ".block_out_channels must be a non-empty array of positive integers");
  }
  // The trainer's own limits (unet_limits.h): what passes here is never out of its range.
  GLEANER_RETURN_IF_ERROR(CheckUnetConfigLimits(config, prefix));
  // SDXL-style added conditioning: its sizes decide the pooled text embedding the dataset needs.
  auto add = config.find("addition_embed_type");
  if (add == config.end() || add->is_null()) return Status::Ok();
  if (*add != "text_time") {
    return Status::Invalid(prefix + ".addition_embed_type " + DumpJson(*add) +
                           " is not supported (only null or \"text_time\", as SDXL)");
  }
  FieldReader r(config, prefix + ".");
  int64_t time_dim = 0, input_dim = 0;
  r.Int("addition_time_embed_dim", &time_dim, true, 1, 4096);
  r.Int("projection_class_embeddings_input_dim", &input_dim, true, 1, 65536);
  if (!r.ok()) return r.status();
  if (input_dim <= 6 * time_dim) {
    return Status::Invalid(
        prefix + ".projection_class_embeddings_input_dim (" + std::to_string(input_dim) +
        ") must exceed 6 * addition_time_embed_dim (" + std::to_string(6 * time_dim) +
        "): the rest is the size of the pooled text embedding");
  }
  return Status::Ok();
}

}  // namespace gleaner
