#include "agent/train/images/transform.h"

#include <cmath>

namespace gleaner::images {
namespace {

enum Purpose : uint64_t { kFlip = 1, kCropTop = 2, kCropLeft = 3 };

uint64_t SplitMix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Uniform in [0, n] (n + 1 values), by multiply-shift (no modulo bias worth naming).
int UniformUpTo(uint64_t draw, int n) {
  return int((static_cast<unsigned __int128>(draw) * (uint64_t(n) + 1)) >> 64);
}

}  // namespace

uint64_t DrawU64(uint64_t seed, uint64_t key, uint64_t purpose) {
  return SplitMix64(SplitMix64(SplitMix64(seed) ^ key) ^ purpose);
}

std::array<int, 2> ResizedSize(int height, int width, int target_height, int target_width) {
  // Image relatively taller than the target: width fits, height = floor(h * tw / w) >= th.
  if (int64_t(height) * target_width >= int64_t(width) * target_height) {
    return {int(int64_t(height) * target_width / width), target_width};
  }
  return {target_height, int(int64_t(width) * target_height / height)};
}

int CenterCropOffset(int size, int target) {
  int d = size - target;
  if (d <= 0) return 0;
  int q = d / 2;
  if (d % 2 == 1 && q % 2 == 1) ++q;  // q + 0.5 rounds to the even neighbour
  return q;
}

PreparedImage PrepareImage(const Image& image, const TransformOptions& o, uint64_t key) {
  PreparedImage p;
  auto [rh, rw] = ResizedSize(image.height, image.width, o.height, o.width);
  // 53 random bits as a double in [0, 1), compared like Python's random.random() < p.
  double u = double(DrawU64(o.seed, key, kFlip) >> 11) * 0x1.0p-53;
  p.flipped = u < o.flip_probability;
  int top, left;  // in the (possibly flipped) resized image
  if (o.center_crop) {
    top = CenterCropOffset(rh, o.height);
    left = CenterCropOffset(rw, o.width);
  } else {
    top = UniformUpTo(DrawU64(o.seed, key, kCropTop), rh - o.height);
    left = UniformUpTo(DrawU64(o.seed, key, kCropLeft), rw - o.width);
  }
  p.time_ids = {image.height, image.width, top, left, o.height, o.width};
  // Flipping the resized image then cropping at `left` = cropping the unflipped one at the
  // mirrored column, then flipping the crop.
  const int unflipped_left = p.flipped ? rw - left - o.width : left;
  Image crop = ResizeCrop(image, rw, rh, unflipped_left, top, o.width, o.height, o.filter);
  float lut[256];
  for (int v = 0; v < 256; ++v) lut[v] = (float(v) / 255.0f - 0.5f) / 0.5f;
  const size_t plane = size_t(o.height) * size_t(o.width);
  p.pixels.resize(3 * plane);
  for (int y = 0; y < o.height; ++y) {
    for (int x = 0; x < o.width; ++x) {
      const uint8_t* px = crop.pixel(p.flipped ? o.width - 1 - x : x, y);
      size_t i = size_t(y) * size_t(o.width) + size_t(x);
      p.pixels[i] = lut[px[0]];
      p.pixels[plane + i] = lut[px[1]];
      p.pixels[2 * plane + i] = lut[px[2]];
    }
  }
  return p;
}

Image TensorToImage(const float* chw, int height, int width) {
  Image out(width, height);
  const size_t plane = size_t(height) * size_t(width);
  for (size_t i = 0; i < plane; ++i) {
    for (int c = 0; c < 3; ++c) {
      float v = chw[c * plane + i] / 2.0f + 0.5f;
      v = v < 0.0f ? 0.0f : v > 1.0f ? 1.0f : v;  // NaN stays NaN and becomes 0 below
      float r = std::nearbyint(v * 255.0f);
      out.rgb[i * 3 + c] = uint8_t(r >= 0.0f && r <= 255.0f ? r : 0.0f);
    }
  }
  return out;
}

}  // namespace gleaner::images
