// From a decoded photo to a training tensor, as diffusers' DreamBooth scripts prepare one.
//
// The SDXL script (train_dreambooth_lora_sdxl.py, diffusers 0.31) does, per image:
//   original_size = (h, w) after EXIF transpose and convert("RGB");
//   Resize(resolution, BILINEAR): shorter side -> resolution, longer -> floor(res * long/short);
//   with random_flip, a horizontal flip with probability 0.5 (of the resized image, BEFORE
//   the crop, so crop coordinates are those of the flipped image);
//   CenterCrop: top = round((H - res) / 2), left = round((W - res) / 2) with Python's
//   round-half-to-even; or RandomCrop: top, left uniform in [0, H - res], [0, W - res];
//   ToTensor + Normalize(0.5, 0.5): x = (u / 255 - 0.5) / 0.5 in float32, CHW;
//   time_ids = (original h, original w, crop top, crop left, target h, target w).
// PrepareImage does exactly that; the SD 1.x scripts are the same without the flip. A target
// need not be square: the image is scaled (aspect kept) to the smallest size covering it, which
// for a square target is the rule above. Randomness (flip, random crop) is not Python's or
// torch's generator: every draw is a hash of (seed, key, purpose), so an image's crop and flip
// depend only on the seed and its key (its index in the dataset), identically on every node.
// Pure functions, thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "agent/train/images/image.h"
#include "agent/train/images/resize.h"

namespace gleaner::images {

struct TransformOptions {
  int height = 512;  // target size
  int width = 512;
  bool center_crop = false;       // false: random crop (the scripts' default)
  double flip_probability = 0.0;  // diffusers' --random_flip is 0.5
  ResizeFilter filter = ResizeFilter::kBilinear;
  uint64_t seed = 0;
};

struct PreparedImage {
  std::vector<float> pixels;  // [3, height, width] in [-1, 1]
  // original h, original w, crop top, crop left, target h, target w (SDXL micro-conditioning)
  std::array<int64_t, 6> time_ids{};
  bool flipped = false;
};

// Size (height, width) the image is resized to before cropping: aspect kept, covering the
// target, the side that fits exactly equal to the target's.
std::array<int, 2> ResizedSize(int height, int width, int target_height, int target_width);
// torchvision's CenterCrop offset: round((size - target) / 2) with ties to even, at least 0.
int CenterCropOffset(int size, int target);
// Uniform 64-bit draw for (seed, key, purpose); the only source of randomness here.
uint64_t DrawU64(uint64_t seed, uint64_t key, uint64_t purpose);

// The key of an image: its position in its list; class images set this bit, so that they draw
// from their own keys.
constexpr uint64_t kClassImageKeyBit = 1ull << 63;
inline uint64_t ImageKey(size_t position, bool is_class) {
  return (is_class ? kClassImageKeyBit : 0) | uint64_t(position);
}

PreparedImage PrepareImage(const Image& image, const TransformOptions& options, uint64_t key);

// The way back, as diffusers' image post-processing: u = round(clamp(x / 2 + 0.5, 0, 1) * 255)
// for a [3, height, width] float tensor; returns [height, width, 3] RGB.
Image TensorToImage(const float* chw, int height, int width);

}  // namespace gleaner::images
