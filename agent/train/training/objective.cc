#include "agent/train/training/objective.h"

#include "agent/train/sampling/noise_schedule.h"

namespace gleaner::train::training {

Objective::Objective(ObjectiveKind kind, const LoraSdParams& params, const torch::Device& device)
    : kind_(kind),
      prediction_type_(params.prediction_type),
      noise_offset_(params.noise_offset),
      snr_gamma_(params.snr_gamma),
      device_(device) {
  alphas_cumprod_ = sampling::ScaledLinearAlphasCumprod().to(device_);
}

NoisedLatents Objective::Noise(const torch::Tensor& lat, torch::Generator& gen) const {
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

torch::Tensor Objective::Loss(const torch::Tensor& prediction, const NoisedLatents& x) const {
  torch::Tensor per = (prediction.to(torch::kFloat32) - x.target).pow(2).mean({1, 2, 3});
  if (x.weight.defined()) per = per * x.weight;
  return per;
}

}  // namespace gleaner::train::training
