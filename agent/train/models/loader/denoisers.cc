#include "agent/train/models/loader/denoisers.h"

#include "agent/train/models/flux/flux_denoiser.h"
#include "agent/train/models/unet/unet.h"

namespace gleaner::train::models {
namespace {

Result<std::shared_ptr<Denoiser>> BuildUnet(const unet::UNetConfig& config,
                                            const TensorMap& weights,
                                            const BasePlacement& placement) {
  std::shared_ptr<unet::UNet> net;
  Status s = CatchTorch("building the UNet", [&]() -> Status {
    net = std::make_shared<unet::UNet>(config, placement);
    return unet::LoadStateDict(*net, weights);
  });
  if (!s.ok()) return s;
  return std::shared_ptr<Denoiser>(std::move(net));
}

Result<std::shared_ptr<Denoiser>> BuildFlux(const flux::FluxConfig& config,
                                            const TensorMap& weights,
                                            const BasePlacement& placement) {
  Result<std::shared_ptr<flux::FluxDenoiser>> net =
      flux::BuildFluxDenoiser(config, weights, placement);
  if (!net.ok()) return net.status();
  return std::shared_ptr<Denoiser>(std::move(*net));
}

Result<std::shared_ptr<Denoiser>> Build(const unet::UNetConfig& c, const TensorMap& weights,
                                        const BasePlacement& placement) {
  return BuildUnet(c, weights, placement);
}
Result<std::shared_ptr<Denoiser>> Build(const flux::FluxConfig& c, const TensorMap& weights,
                                        const BasePlacement& placement) {
  return BuildFlux(c, weights, placement);
}
DenoiserShape Shape(const unet::UNetConfig& c) {
  return unet::ShapeOf(c);
}
DenoiserShape Shape(const flux::FluxConfig& c) {
  return flux::ShapeOf(c);
}

}  // namespace

Result<std::shared_ptr<Denoiser>> BuildDenoiser(const DenoiserConfig& config,
                                                const TensorMap& weights,
                                                const BasePlacement& placement) {
  return std::visit([&](const auto& c) { return Build(c, weights, placement); }, config);
}

DenoiserShape ShapeOf(const DenoiserConfig& config) {
  return std::visit([](const auto& c) { return Shape(c); }, config);
}

}  // namespace gleaner::train::models
