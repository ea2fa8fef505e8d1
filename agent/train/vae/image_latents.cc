#include "agent/train/vae/image_latents.h"

namespace gleaner::train::vae {

using torch::Tensor;

Tensor ScaleLatents(const VaeConfig& c, const Tensor& z) {
  return (c.shift_factor ? z - *c.shift_factor : z) * c.scaling_factor;
}

Tensor UnscaleLatents(const VaeConfig& c, const Tensor& latents) {
  Tensor z = latents / c.scaling_factor;
  return c.shift_factor ? z + *c.shift_factor : z;
}

Tensor DecodedToU8(const Tensor& decoded) {
  Tensor x = (decoded.to(torch::kFloat32) / 2 + 0.5).clamp(0, 1);
  return (x * 255).round().to(torch::kCPU, torch::kUInt8);
}

Result<Tensor> EncodeToLatents(AutoencoderKL& vae, const Tensor& images,
                               torch::Generator& cpu_generator) {
  GLEANER_RETURN_IF_ERROR(CheckImages(vae.config(), images));
  Tensor latents;
  GLEANER_RETURN_IF_ERROR(CatchTorch("encoding images", [&]() -> Status {
    latents = ScaleLatents(vae.config(), vae.Encode(images).Sample(cpu_generator));
    return Status::Ok();
  }));
  return latents;
}

Result<Tensor> DecodeToImages(AutoencoderKL& vae, const Tensor& latents) {
  GLEANER_RETURN_IF_ERROR(CheckLatents(vae.config(), latents));
  Tensor images;
  GLEANER_RETURN_IF_ERROR(CatchTorch("decoding latents", [&]() -> Status {
    images = DecodedToU8(vae.Decode(UnscaleLatents(vae.config(), latents.to(torch::kFloat32))));
    return Status::Ok();
  }));
  return images;
}

}  // namespace gleaner::train::vae
