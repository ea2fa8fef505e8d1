#include "agent/train/sampling/scheduler_config.h"

#include <cmath>

#include "agent/train/nn/torch_io.h"

namespace gleaner::train::sampling {
namespace {

// Schedulers whose configs diffusers declares interchangeable with Euler's and DDIM's
// (KarrasDiffusionSchedulers without EDM, which has no betas).
constexpr const char* kCompatibleClasses[] = {"DDIMScheduler",
                                              "DDPMScheduler",
                                              "PNDMScheduler",
                                              "LMSDiscreteScheduler",
                                              "EulerDiscreteScheduler",
                                              "HeunDiscreteScheduler",
                                              "EulerAncestralDiscreteScheduler",
                                              "DPMSolverMultistepScheduler",
                                              "DPMSolverSinglestepScheduler",
                                              "KDPM2DiscreteScheduler",
                                              "KDPM2AncestralDiscreteScheduler",
                                              "DEISMultistepScheduler",
                                              "UniPCMultistepScheduler",
                                              "DPMSolverSDEScheduler"};

Status CheckClass(const Json& j) {
  auto it = j.find("_class_name");
  if (it == j.end() || it->is_null()) return Status::Ok();
  if (!it->is_string()) return Status::Invalid("scheduler config: _class_name must be a string");
  for (const char* c : kCompatibleClasses) {
    if (*it == c) return Status::Ok();
  }
  return Status::Invalid("scheduler config: _class_name " + it->get<std::string>() +
                         " is not supported (DDPM-family schedulers only, sampled as "
                         "EulerDiscreteScheduler or DDIMScheduler)");
}

// Fields that select features this implementation does not have: they must be absent, null or
// equal to the value given here.
Status CheckUnsupported(const Json& j, SamplerKind kind) {
  struct Want {
    const char* key;
    Json value;
  };
  const Want euler[] = {{"use_karras_sigmas", false},
                        {"use_exponential_sigmas", false},
                        {"use_beta_sigmas", false},
                        {"timestep_type", "discrete"},
                        {"interpolation_type", "linear"}};
  const Want ddim[] = {{"thresholding", false}};
  auto check = [&](const Want* w, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      auto it = j.find(w[i].key);
      if (it != j.end() && !it->is_null() && *it != w[i].value) {
        return Status::Invalid(std::string("scheduler config: ") + w[i].key + " " + DumpJson(*it) +
                               " is not supported (only " + DumpJson(w[i].value) + ")");
      }
    }
    return Status::Ok();
  };
  return kind == SamplerKind::kEuler ? check(euler, std::size(euler)) : check(ddim, 1);
}

template <typename E>
bool Choice(FieldReader& r, const char* key, std::initializer_list<std::pair<const char*, E>> opts,
            E* out) {
  std::string s;
  if (!r.String(key, &s, false, 64) || s.empty()) return r.ok();
  std::string names;
  for (const auto& [name, value] : opts) {
    if (s == name) {
      *out = value;
      return true;
    }
    names += std::string(names.empty() ? "" : ", ") + name;
  }
  return r.Fail("scheduler config: " + std::string(key) + " \"" + s + "\" is not supported (" +
                names + ")");
}

Status ReadNoise(const Json& j, FieldReader& r, NoiseSchedule* n) {
  r.Int("num_train_timesteps", &n->num_train_timesteps, false, 1, 100000);
  r.Number("beta_start", &n->beta_start, false, 0, 1);
  r.Number("beta_end", &n->beta_end, false, 0, 1);
  r.String("beta_schedule", &n->beta_schedule, false, 64);
  r.Bool("rescale_betas_zero_snr", &n->rescale_betas_zero_snr, false);
  if (!r.ok()) return r.status();
  auto tb = j.find("trained_betas");
  if (tb != j.end() && !tb->is_null()) {
    if (!tb->is_array() || tb->size() != size_t(n->num_train_timesteps)) {
      return Status::Invalid(
          "scheduler config: trained_betas must be a list of num_train_timesteps numbers");
    }
    for (const Json& v : *tb) {
      if (!v.is_number() || !(v.get<double>() > 0 && v.get<double>() < 1)) {
        return Status::Invalid("scheduler config: trained_betas must be numbers in (0, 1)");
      }
      n->trained_betas.push_back(v.get<double>());
    }
  } else if (n->beta_schedule != "linear" && n->beta_schedule != "scaled_linear" &&
             n->beta_schedule != "squaredcos_cap_v2") {
    return Status::Invalid("scheduler config: beta_schedule \"" + n->beta_schedule +
                           "\" is not supported (linear, scaled_linear, squaredcos_cap_v2)");
  } else if (n->beta_schedule != "squaredcos_cap_v2" &&
             !(n->beta_start > 0 && n->beta_end < 1 && n->beta_start <= n->beta_end)) {
    return Status::Invalid("scheduler config: need 0 < beta_start <= beta_end < 1");
  }
  return Status::Ok();
}

}  // namespace

Result<SamplerKind> ParseSamplerKind(const std::string& name) {
  if (name == "euler") return SamplerKind::kEuler;
  if (name == "ddim") return SamplerKind::kDdim;
  return Status::Invalid("unknown sampler \"" + name + "\" (euler, ddim)");
}

Result<SamplerKind> SamplerKindOfConfig(const Json& j) {
  GLEANER_RETURN_IF_ERROR(CheckClass(j));
  auto it = j.find("_class_name");
  if (it != j.end() && *it == "EulerDiscreteScheduler") return SamplerKind::kEuler;
  if (it != j.end() && *it == "DDIMScheduler") return SamplerKind::kDdim;
  return Status::Invalid(
      "scheduler config: _class_name is neither EulerDiscreteScheduler nor DDIMScheduler; name "
      "the sampler (euler or ddim)");
}

Result<SchedulerConfig> ParseSchedulerConfig(const Json& j, SamplerKind kind) {
  if (!j.is_object()) return Status::Invalid("scheduler config must be a JSON object");
  GLEANER_RETURN_IF_ERROR(CheckClass(j));
  GLEANER_RETURN_IF_ERROR(CheckUnsupported(j, kind));
  SchedulerConfig c;
  c.kind = kind;
  // diffusers' defaults of the target class.
  bool euler = kind == SamplerKind::kEuler;
  c.timestep_spacing = euler ? Spacing::kLinspace : Spacing::kLeading;
  FieldReader r(j, "scheduler config: ");
  GLEANER_RETURN_IF_ERROR(ReadNoise(j, r, &c.noise));
  Choice<Prediction>(r, "prediction_type",
                     {{"epsilon", Prediction::kEpsilon},
                      {"v_prediction", Prediction::kVPrediction},
                      {"sample", Prediction::kSample}},
                     &c.prediction_type);
  Choice<Spacing>(r, "timestep_spacing",
                  {{"leading", Spacing::kLeading},
                   {"trailing", Spacing::kTrailing},
                   {"linspace", Spacing::kLinspace}},
                  &c.timestep_spacing);
  r.Int("steps_offset", &c.steps_offset, false, 0, 1000);
  if (euler) {
    Choice<bool>(r, "final_sigmas_type", {{"zero", true}, {"sigma_min", false}},
                 &c.final_sigma_zero);
  } else {
    r.Bool("set_alpha_to_one", &c.set_alpha_to_one, false);
    r.Bool("clip_sample", &c.clip_sample, false);
    r.Number("clip_sample_range", &c.clip_sample_range, false, 1e-6, 1e6);
  }
  if (!r.ok()) return r.status();
  return c;
}

Result<SchedulerConfig> LoadSchedulerConfig(const std::string& path, SamplerKind kind) {
  Result<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  Result<Json> j = ParseJson(*text);
  if (!j.ok()) return Status::Invalid(path + ": " + j.status().message());
  Result<SchedulerConfig> c = ParseSchedulerConfig(*j, kind);
  if (!c.ok()) return Status::Invalid(path + ": " + c.status().message());
  return c;
}

}  // namespace gleaner::train::sampling
