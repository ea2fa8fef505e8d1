#include "agent/train/training/flow_match_timesteps.h"

#include <cmath>

namespace gleaner::train::training {

using torch::Tensor;

FlowMatchTable TrainTable(const sampling::FlowMatchConfig& c) {
  const int64_t n = c.num_train_timesteps;
  // np.linspace(1, N, N, dtype=float32)[::-1]: the integers N..1, exact in fp32.
  Tensor t = torch::arange(n, 0, -1, torch::kFloat32);
  Tensor sigmas = t / n;
  if (!c.use_dynamic_shifting) {
    // shift * sigmas / (1 + (shift - 1) * sigmas), torch fp32 with Python-float scalars.
    sigmas = sigmas * c.shift / ((sigmas * (c.shift - 1)) + 1);
  }
  return {sigmas * n, sigmas};
}

Result<WeightingScheme> ParseWeightingScheme(const std::string& name) {
  if (name == "none") return WeightingScheme{};
  if (name == "logit_normal") return WeightingScheme{Density::kLogitNormal, LossWeighting::kNone};
  if (name == "mode") return WeightingScheme{Density::kMode, LossWeighting::kNone};
  if (name == "sigma_sqrt") return WeightingScheme{Density::kUniform, LossWeighting::kSigmaSqrt};
  if (name == "cosmap") return WeightingScheme{Density::kUniform, LossWeighting::kCosmap};
  return Status::Invalid("weighting_scheme \"" + name +
                         "\" is not supported (none, logit_normal, mode, sigma_sqrt, cosmap)");
}

Result<Density> ParseDensity(const std::string& name) {
  if (name == "uniform") return Density::kUniform;
  if (name == "logit_normal") return Density::kLogitNormal;
  if (name == "mode") return Density::kMode;
  return Status::Invalid("timestep density \"" + name +
                         "\" is not supported (uniform, logit_normal, mode)");
}

Result<LossWeighting> ParseLossWeighting(const std::string& name) {
  if (name == "none") return LossWeighting::kNone;
  if (name == "sigma_sqrt") return LossWeighting::kSigmaSqrt;
  if (name == "cosmap") return LossWeighting::kCosmap;
  return Status::Invalid("loss weighting \"" + name +
                         "\" is not supported (none, sigma_sqrt, cosmap)");
}

Status CheckDensityParams(Density density, double logit_mean, double logit_std, double mode_scale) {
  if (density == Density::kLogitNormal &&
      !(std::isfinite(logit_mean) && std::isfinite(logit_std) && logit_std > 0)) {
    return Status::Invalid("logit_normal needs a finite logit_mean and a logit_std > 0");
  }
  if (density == Density::kMode && !(std::isfinite(mode_scale) && std::fabs(mode_scale) <= 1e3)) {
    return Status::Invalid("mode needs a finite mode_scale in [-1000, 1000]");
  }
  return Status::Ok();
}

Tensor SampleDensity(Density density, double logit_mean, double logit_std, double mode_scale,
                     int64_t batch, torch::Generator generator) {
  torch::TensorOptions f32 = torch::TensorOptions().dtype(torch::kFloat32);
  switch (density) {
    case Density::kLogitNormal:
      return torch::sigmoid(torch::normal(logit_mean, logit_std, {batch}, generator, f32));
    case Density::kMode: {
      Tensor v = torch::rand({batch}, generator, f32);
      // 1 - u - mode_scale * (torch.cos(math.pi * u / 2) ** 2 - 1 + u)
      Tensor bend = torch::cos(v * M_PI / 2).pow(2) - 1 + v;
      return torch::rsub(v, 1) - bend * mode_scale;
    }
    case Density::kUniform:
      break;
  }
  return torch::rand({batch}, generator, f32);
}

TimestepDraw TimestepsForU(const FlowMatchTable& table, const Tensor& u) {
  const int64_t n = table.timesteps.size(0);
  TimestepDraw d;
  d.indices = (u.to(torch::kCPU, torch::kFloat32) * n).to(torch::kInt64).clamp(0, n - 1);
  d.timesteps = table.timesteps.index_select(0, d.indices);
  d.sigmas = table.sigmas.index_select(0, d.indices);
  return d;
}

namespace {

template <typename F>
Tensor MapFp32(const Tensor& sigmas, F f) {
  Tensor s = sigmas.to(torch::kCPU, torch::kFloat32).contiguous().clone();
  float* p = s.data_ptr<float>();
  for (int64_t i = 0; i < s.numel(); ++i) p[i] = float(f(double(p[i])));
  return s.to(sigmas.device());
}

}  // namespace

Tensor StaticShiftSigmas(const Tensor& sigmas, double shift) {
  return MapFp32(sigmas, [&](double s) { return sampling::StaticShift(shift, s); });
}

Tensor ResolutionShiftSigmas(const sampling::FlowMatchConfig& c, const Tensor& sigmas,
                             int64_t image_seq_len) {
  const double mu = sampling::CalculateShift(c, image_seq_len);
  return MapFp32(sigmas, [&](double s) { return sampling::TimeShift(c, mu, s); });
}

Tensor LossWeights(LossWeighting weighting, const Tensor& sigmas) {
  switch (weighting) {
    case LossWeighting::kSigmaSqrt:
      return sigmas.pow(-2.0).to(torch::kFloat32);
    case LossWeighting::kCosmap: {
      Tensor bot = torch::rsub(sigmas * 2, 1) + sigmas.pow(2) * 2;
      // Python's `2 / t` is t.reciprocal() * 2.
      return (bot * M_PI).reciprocal() * 2;
    }
    case LossWeighting::kNone:
      break;
  }
  return torch::ones_like(sigmas);
}

}  // namespace gleaner::train::training
