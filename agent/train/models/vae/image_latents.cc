#include "agent/train/models/vae/image_latents.h"

#include <cstring>

#include "agent/train/images/png_encode.h"

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
  // Training images must decode back to their own size.
  const int64_t f = vae.config().spatial_factor();
  if (images.size(2) % f != 0 || images.size(3) % f != 0) {
    return Status::Invalid("image height and width must be multiples of " + std::to_string(f) +
                           " (the VAE's downsampling factor), got " +
                           std::to_string(images.size(2)) + "x" + std::to_string(images.size(3)));
  }
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

Result<std::vector<std::string>> EncodePngs(const Tensor& images_u8) {
  if (images_u8.dim() != 4 || images_u8.size(1) != 3 || images_u8.scalar_type() != torch::kUInt8) {
    return Status::Invalid("PNG output needs uint8 RGB images [B, 3, H, W]");
  }
  std::vector<std::string> files;
  // [B, 3, H, W] -> [B, H, W, 3], the row-major RGB layout of images::Image.
  Tensor hwc = images_u8.to(torch::kCPU).permute({0, 2, 3, 1}).contiguous();
  for (int64_t b = 0; b < hwc.size(0); ++b) {
    images::Image image(int(hwc.size(2)), int(hwc.size(1)));
    std::memcpy(image.rgb.data(), hwc[b].data_ptr<uint8_t>(), image.rgb.size());
    Result<std::string> png = images::EncodePng(image);
    if (!png.ok()) return png.status();
    files.push_back(std::move(*png));
  }
  return files;
}

}  // namespace gleaner::train::vae
