#include "agent/train/training/objective.h"

#include "agent/train/sampling/noise_schedule.h"
#include "agent/train/training/flow_match_timesteps.h"

namespace gleaner::train::training {
namespace {}  // namespace

Objective::Objective(ObjectiveKind kind, const LoraSdParams& params, const torch::Device& device)
    : kind_(kind),
      params_(params),
      prediction_type_(params.prediction_type),
      noise_offset_(params.noise_offset),
      snr_gamma_(params.snr_gamma),
      device_(device) {}

Result<std::unique_ptr<Objective>> Objective::Create(ObjectiveKind kind, const LoraSdParams& params,
                                                     const Json& scheduler_config,
                                                     const torch::Device& device) {
  std::unique_ptr<Objective> o(new Objective(kind, params, device));
  if (kind == ObjectiveKind::kDdpm) {
    o->alphas_cumprod_ = sampling::ScaledLinearAlphasCumprod().to(device);
    return o;
  }
  Result<sampling::FlowMatchConfig> c = sampling::ParseFlowMatchConfig(
      scheduler_config.is_object() ? scheduler_config : Json::object());
  if (!c.ok()) return Status(c.status().code(), "scheduler config: " + c.status().message());
  o->flow_ = *c;
  Result<WeightingScheme> scheme = ParseWeightingScheme(params.weighting_scheme);
  if (!scheme.ok()) return scheme.status();
  GLEANER_RETURN_IF_ERROR(
      CheckDensityParams(scheme->density, params.logit_mean, params.logit_std, params.mode_scale));
  o->scheme_ = *scheme;
  o->table_ = TrainTable(o->flow_);
  return o;
}

NoisedLatents Objective::Noise(const torch::Tensor& lat, torch::Generator& gen) const {
  return kind_ == ObjectiveKind::kFlowMatch ? NoiseFlowMatch(lat, gen) : NoiseDdpm(lat, gen);
}

NoisedLatents Objective::NoiseDdpm(const torch::Tensor& lat, torch::Generator& gen) const {
  const int64_t b = lat.size(0);
  auto f32 = torch::TensorOptions().dtype(torch::kFloat32);
  torch::Tensor noise = torch::randn(lat.sizes(), gen, f32);
  if (noise_offset_ > 0) {
    noise = noise + noise_offset_ * torch::randn({b, lat.size(1), 1, 1}, gen, f32);
  }
  torch::Tensor t = torch::randint(0, alphas_cumprod_.size(0), {b}, gen,
                                   torch::TensorOptions().dtype(torch::kInt64));
  noise = noise.to(device_);
  t = t.to(device_);
  torch::Tensor ac = alphas_cumprod_.index_select(0, t).view({b, 1, 1, 1});
  torch::Tensor sa = ac.sqrt(), so = (1.0 - ac).sqrt();
  NoisedLatents x;
  x.noisy = sa * lat + so * noise;
  x.timesteps = t;
  x.target = prediction_type_ == "epsilon" ? noise : sa * noise - so * lat;
  if (snr_gamma_ > 0) {
    torch::Tensor snr = (ac / (1.0 - ac)).view({b});
    torch::Tensor w = torch::clamp_max(snr, snr_gamma_);
    x.weight = prediction_type_ == "epsilon" ? w / snr : w / (snr + 1.0);
  }
  return x;
}

NoisedLatents Objective::NoiseFlowMatch(const torch::Tensor& lat, torch::Generator& gen) const {
  const int64_t b = lat.size(0);
  auto f32 = torch::TensorOptions().dtype(torch::kFloat32);
  torch::Tensor noise = torch::randn(lat.sizes(), gen, f32);
  torch::Tensor u = SampleDensity(scheme_.density, params_.logit_mean, params_.logit_std,
                                  params_.mode_scale, b, gen);
  torch::Tensor sigma = TimestepsForU(table_, u).sigmas;
  if (params_.timestep_shift == "static") {
    sigma = StaticShiftSigmas(sigma, params_.discrete_flow_shift);
  } else if (params_.timestep_shift == "resolution") {
    // FluxPipeline's mu for this image's token count (2x2 latent patches).
    sigma = ResolutionShiftSigmas(flow_, sigma, (lat.size(2) / 2) * (lat.size(3) / 2));
  }
  sigma = sigma.to(torch::kFloat32);
  noise = noise.to(device_);
  torch::Tensor s4 = sigma.to(device_).view({b, 1, 1, 1});
  NoisedLatents x;
  x.noisy = (1.0 - s4) * lat + s4 * noise;
  x.timesteps = sigma.to(device_);
  x.target = noise - lat;
  if (scheme_.weighting != LossWeighting::kNone) {
    x.weight = LossWeights(scheme_.weighting, sigma).to(device_, torch::kFloat32);
  }
  return x;
}

torch::Tensor Objective::Loss(const torch::Tensor& prediction, const NoisedLatents& x) const {
  torch::Tensor per = (prediction.to(torch::kFloat32) - x.target).pow(2).mean({1, 2, 3});
  if (x.weight.defined()) per = per * x.weight;
  return per;
}

}  // namespace gleaner::train::training
