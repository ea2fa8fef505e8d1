#include "agent/train/models/loader/denoisers.h"

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

}  // namespace

Result<std::shared_ptr<Denoiser>> BuildDenoiser(const DenoiserConfig& config,
                                                const TensorMap& weights,
                                                const BasePlacement& placement) {
  return std::visit([&](const auto& c) { return BuildUnet(c, weights, placement); }, config);
}

DenoiserShape ShapeOf(const DenoiserConfig& config) {
  return std::visit([](const auto& c) { return unet::ShapeOf(c); }, config);
}

}  // namespace gleaner::train::models
