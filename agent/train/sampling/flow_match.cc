#include "agent/train/sampling/flow_match.h"

#include <cmath>

#include "agent/train/nn/torch_io.h"

namespace gleaner::train::sampling {
namespace {

constexpr const char* kClass = "FlowMatchEulerDiscreteScheduler";

// Fields that select what this implementation does not have: absent, null or false.
Status CheckUnsupported(const Json& j) {
  for (const char* key :
       {"use_karras_sigmas", "use_exponential_sigmas", "use_beta_sigmas", "stochastic_sampling"}) {
    auto it = j.find(key);
    if (it != j.end() && !it->is_null() && *it != false) {
      return Status::Invalid(std::string("scheduler config: ") + key + " " + DumpJson(*it) +
                             " is not supported (only false)");
    }
  }
  return Status::Ok();
}

}  // namespace

bool IsFlowMatchConfig(const Json& j) {
  if (!j.is_object()) return false;
  auto it = j.find("_class_name");
  return it != j.end() && *it == kClass;
}

Result<FlowMatchConfig> ParseFlowMatchConfig(const Json& j) {
  if (!j.is_object()) return Status::Invalid("scheduler config must be a JSON object");
  auto cls = j.find("_class_name");
  if (cls != j.end() && !cls->is_null() && *cls != kClass) {
    return Status::Invalid("scheduler config: _class_name " + DumpJson(*cls) +
                           " is not supported (only " + kClass + " for flow matching)");
  }
  GLEANER_RETURN_IF_ERROR(CheckUnsupported(j));
  FlowMatchConfig c;
  FieldReader r(j, "scheduler config: ");
  r.Int("num_train_timesteps", &c.num_train_timesteps, false, 1, 100000);
  r.Number("shift", &c.shift, false, 1e-6, 1e6);
  r.Bool("use_dynamic_shifting", &c.use_dynamic_shifting, false);
  r.Number("base_shift", &c.base_shift, false, -1e3, 1e3);
  r.Number("max_shift", &c.max_shift, false, -1e3, 1e3);
  r.Int("base_image_seq_len", &c.base_image_seq_len, false, 1, int64_t(1) << 40);
  r.Int("max_image_seq_len", &c.max_image_seq_len, false, 1, int64_t(1) << 40);
  r.Bool("invert_sigmas", &c.invert_sigmas, false);
  double terminal = 0;
  if (r.Has("shift_terminal") && r.Number("shift_terminal", &terminal, false, 0, 1)) {
    if (terminal >= 1) return Status::Invalid("scheduler config: shift_terminal must be in [0, 1)");
    // diffusers stretches only when the value is truthy: 0 means none.
    if (terminal > 0) c.shift_terminal = terminal;
  }
  std::string shift_type;
  if (r.String("time_shift_type", &shift_type, false, 64) && !shift_type.empty()) {
    if (shift_type == "exponential") {
      c.time_shift_type = TimeShiftType::kExponential;
    } else if (shift_type == "linear") {
      c.time_shift_type = TimeShiftType::kLinear;
    } else {
      return Status::Invalid("scheduler config: time_shift_type \"" + shift_type +
                             "\" is not supported (exponential, linear)");
    }
  }
  if (!r.ok()) return r.status();
  if (c.use_dynamic_shifting && c.base_image_seq_len == c.max_image_seq_len) {
    return Status::Invalid(
        "scheduler config: base_image_seq_len and max_image_seq_len must differ with "
        "use_dynamic_shifting");
  }
  return c;
}

Result<FlowMatchConfig> LoadFlowMatchConfig(const std::string& path) {
  Result<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  Result<Json> j = ParseJson(*text);
  if (!j.ok()) return Status::Invalid(path + ": " + j.status().message());
  Result<FlowMatchConfig> c = ParseFlowMatchConfig(*j);
  if (!c.ok()) return Status::Invalid(path + ": " + c.status().message());
  return c;
}

double CalculateShift(int64_t image_seq_len, int64_t base_seq_len, int64_t max_seq_len,
                      double base_shift, double max_shift) {
  double m = (max_shift - base_shift) / double(max_seq_len - base_seq_len);
  double b = base_shift - m * double(base_seq_len);
  return double(image_seq_len) * m + b;
}

double CalculateShift(const FlowMatchConfig& c, int64_t image_seq_len) {
  return CalculateShift(image_seq_len, c.base_image_seq_len, c.max_image_seq_len, c.base_shift,
                        c.max_shift);
}

double TimeShift(const FlowMatchConfig& c, double mu, double sigma) {
  // numpy float32 arithmetic with Python floats as weak scalars: every step rounds to fp32;
  // (1/σ - 1) ** 1.0 is the value itself.
  const float t = float(sigma);
  const float odds = 1.0f / t - 1.0f;
  if (c.time_shift_type == TimeShiftType::kLinear) {
    const float m = float(mu);
    return double(m / (m + odds));
  }
  const float e = float(std::exp(mu));
  return double(e / (e + odds));
}

double StaticShift(double shift, double sigma) {
  const float s = float(sigma);
  return double(float(shift) * s / (1.0f + float(shift - 1.0) * s));
}

Result<FlowMatchSchedule> InferenceSchedule(const FlowMatchConfig& c, int steps,
                                            int64_t image_seq_len) {
  if (steps < 1 || steps > 10000) {
    return Status::Invalid("number of sampling steps must be in [1, 10000], got " +
                           std::to_string(steps));
  }
  FlowMatchSchedule out;
  if (c.use_dynamic_shifting) {
    if (image_seq_len < 1) {
      return Status::Invalid(
          "the image sequence length must be >= 1 (the scheduler config uses dynamic shifting)");
    }
    out.mu = CalculateShift(c, image_seq_len);
  }
  // FluxPipeline: np.linspace(1.0, 1 / steps, steps) in double, then float32.
  const double start = 1.0, stop = 1.0 / steps;
  std::vector<float> sig(static_cast<size_t>(steps));
  for (int i = 0; i < steps; ++i) {
    double v = steps > 1 ? double(i) * ((stop - start) / double(steps - 1)) + start : start;
    if (steps > 1 && i == steps - 1) v = stop;
    sig[size_t(i)] = float(v);
  }
  for (float& s : sig) {
    s = float(c.use_dynamic_shifting ? TimeShift(c, out.mu, s) : StaticShift(c.shift, s));
  }
  if (c.shift_terminal) {
    // stretch_shift_to_terminal in float32: 1 - (1 - σ) / ((1 - σ_last) / (1 - terminal)).
    const float scale = (1.0f - sig.back()) / float(1.0 - *c.shift_terminal);
    for (float& s : sig) s = 1.0f - (1.0f - s) / scale;
  }
  const float n = float(c.num_train_timesteps);
  for (float& s : sig) {
    if (c.invert_sigmas) s = 1.0f - s;
    if (!std::isfinite(s)) {
      return Status::Invalid("the flow-matching schedule is not finite for this config (mu " +
                             std::to_string(out.mu) + ")");
    }
    out.timesteps.push_back(double(s * n));
    out.sigmas.push_back(double(s));
  }
  out.sigmas.push_back(c.invert_sigmas ? 1.0 : 0.0);
  return out;
}

torch::Tensor EulerStep(const torch::Tensor& model_output, double sigma, double sigma_next,
                        const torch::Tensor& x) {
  const float dt = float(sigma_next) - float(sigma);
  torch::Tensor prev = x.to(torch::kFloat32) + model_output * double(dt);
  return prev.to(model_output.scalar_type());
}

}  // namespace gleaner::train::sampling
