// The registration point of the denoiser families: which networks exist, how one is built from
// its config and base weights, and the sizes its inputs must have. Everything above the models
// (training/, sampling/, jobs/) builds denoisers only through here and holds them as Denoiser
// (denoiser/denoiser.h). A new family adds an alternative to DenoiserConfig and a branch to each
// function below (models/loader/denoisers.cc), and a reader of its config to the model loader.
//
// Contract: BuildDenoiser builds the network without storage on `placement`, fills it from
// `weights` (any float dtype as stored; converted tensor by tensor) and freezes it; errors
// (missing, unexpected or mis-shaped keys; libtorch failures) are one Status naming the keys.
// Where no conversion is needed the network shares storage with `weights`. Thread-compatible.
#pragma once

#include <memory>
#include <variant>

#include "agent/train/denoiser/denoiser.h"
#include "agent/train/models/flux/flux_config.h"
#include "agent/train/models/unet/unet_config.h"
#include "agent/train/nn/placement.h"
#include "agent/train/nn/torch_io.h"
#include "shared/status.h"

namespace gleaner::train::models {

// One alternative per family: the SD 1.x/2.x/SDXL UNet, the FLUX.1 transformer.
using DenoiserConfig = std::variant<unet::UNetConfig, flux::FluxConfig>;

Result<std::shared_ptr<Denoiser>> BuildDenoiser(const DenoiserConfig& config,
                                                const TensorMap& weights,
                                                const BasePlacement& placement);

// The input sizes of a denoiser of `config` (what Denoiser::shape() of the built one says).
DenoiserShape ShapeOf(const DenoiserConfig& config);

}  // namespace gleaner::train::models
