#include "shared/job_params.h"

#include <algorithm>

namespace gleaner {
namespace {

// Reads an optional string that must be one of `allowed` (null-terminated list).
bool Enum(FieldReader& r, const char* key, const char* const* allowed, const char* def, Json* out) {
  std::string v = def;
  if (!r.String(key, &v, false, 64)) return false;
  for (const char* const* a = allowed; *a != nullptr; ++a) {
    if (v == *a) {
      (*out)[key] = v;
      return true;
    }
  }
  std::string list;
  for (const char* const* a = allowed; *a != nullptr; ++a) {
    list += (list.empty() ? "" : ", ") + std::string(*a);
  }
  return r.Fail(std::string("params.") + key + " must be one of: " + list);
}

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
bool SampleFields(FieldReader& r, const Json& params, int64_t steps, int64_t checkpoint_every,
                  int64_t seed, Json* out) {
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
  NumField(r, "guidance_scale", 0, 100, 7.5, out);
  IntField(r, "sample_seed", 0, kMaxSafeInteger, seed, out);
  int64_t res = 512;
  if (r.Int("sample_resolution", &res, false, 8, 4096) && res % 8 != 0) {
    return r.Fail("params.sample_resolution must be a multiple of 8 in [8, 4096]");
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

Result<Json> LoraSd(const Json& params) {
  static const char* const kKeys[] = {"steps",
                                      "batch_size",
                                      "learning_rate",
                                      "rank",
                                      "alpha",
                                      "seed",
                                      "checkpoint_every",
                                      "mixed_precision",
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
                                      "sample_prompts",
                                      "sample_every",
                                      "sample_steps",
                                      "guidance_scale",
                                      "sample_seed",
                                      "sample_resolution",
                                      nullptr};
  static const char* const kPrecision[] = {"no", "fp16", "bf16", nullptr};
  static const char* const kSchedulers[] = {"constant", "constant_with_warmup", "linear", "cosine",
                                            nullptr};
  static const char* const kPrediction[] = {"epsilon", "v_prediction", nullptr};
  FieldReader r(params, "params.");
  r.OnlyKeys(kKeys);
  int64_t steps = 0;
  r.Int("steps", &steps, true, 1, kMaxJobSteps);
  if (!r.ok()) return r.status();
  Json out = Json::object();
  out["steps"] = steps;
  IntField(r, "batch_size", 1, 1024, 1, &out);
  NumField(r, "learning_rate", 1e-12, 1.0, 1e-4, &out);
  IntField(r, "rank", 1, 1024, 4, &out);
  if (!r.ok()) return r.status();
  NumField(r, "alpha", 1e-6, 1e6, double(out["rank"].get<int64_t>()), &out);
  IntField(r, "seed", 0, kMaxSafeInteger, 0, &out);
  IntField(r, "checkpoint_every", 1, steps, std::min<int64_t>(100, steps), &out);
  Enum(r, "mixed_precision", kPrecision, "no", &out);
  bool gc = false;
  if (r.Bool("gradient_checkpointing", &gc, false)) out["gradient_checkpointing"] = gc;
  IntField(r, "gradient_accumulation", 1, 1024, 1, &out);
  Enum(r, "lr_scheduler", kSchedulers, "constant", &out);
  IntField(r, "warmup_steps", 0, steps, 0, &out);
  Enum(r, "prediction_type", kPrediction, "epsilon", &out);
  NumField(r, "prior_loss_weight", 0, 1000, 1.0, &out);
  NumField(r, "snr_gamma", 0, 1000, 0, &out);
  NumField(r, "noise_offset", 0, 1, 0, &out);
  NumField(r, "max_grad_norm", 0, 1e6, 1.0, &out);
  NumField(r, "adam_beta1", 0, 0.999999, 0.9, &out);
  NumField(r, "adam_beta2", 0, 0.999999999, 0.999, &out);
  NumField(r, "adam_weight_decay", 0, 10, 0.01, &out);
  NumField(r, "adam_epsilon", 1e-20, 1, 1e-8, &out);
  if (!r.ok()) return r.status();
  SampleFields(r, params, steps, out["checkpoint_every"].get<int64_t>(), out["seed"].get<int64_t>(),
               &out);
  if (!r.ok()) return r.status();
  return out;
}

}  // namespace

bool IsKnownJobKind(const std::string& kind) {
  return kind == "synthetic" || kind == "lora-sd";
}

bool JobKindNeedsInputs(const std::string& kind) {
  return kind == "lora-sd";
}

Result<Json> NormalizeParams(const std::string& kind, const Json& params) {
  if (!params.is_object()) return Status::Invalid("params must be a JSON object");
  if (kind == "synthetic") return Synthetic(params);
  if (kind == "lora-sd") return LoraSd(params);
  return Status::Invalid("unknown job kind '" + kind + "' (known: synthetic, lora-sd)");
}

Status CheckUnetConfig(const Json& config, const std::string& prefix) {
  if (!config.is_object() || config.empty()) {
    return Status::Invalid(prefix + " must be a non-empty JSON object (a diffusers UNet config)");
  }
  auto it = config.find("block_out_channels");
  bool ok = it != config.end() && it->is_array() && !it->empty() && it->size() <= 16;
  if (ok) {
    for (const Json& c : *it) {
      if (!c.is_number_integer() || c.get<int64_t>() < 1 || c.get<int64_t>() > 65536) ok = false;
    }
  }
  if (!ok) {
    return Status::Invalid(prefix +
                           ".block_out_channels must be a non-empty array of positive integers");
  }
  return Status::Ok();
}

}  // namespace gleaner
