// Resizing RGB images exactly as Pillow's `Image.resize` does for 8-bit RGB, which is what
// torchvision's `Resize(..., interpolation=BILINEAR)` calls on a PIL image.
//
// Pillow resamples separably (horizontal pass into an 8-bit image, then vertical) with a
// convolution filter whose support grows with the downscale factor (so downscaling is
// antialiased), coefficients normalised to sum 1 and then rounded to 22-bit fixed point. This
// is a re-implementation of that arithmetic: outputs are bit-identical to Pillow (checked in
// tests/unit/images against values computed with Pillow). Pure function, thread-safe.
#pragma once

#include "agent/train/images/image.h"

namespace gleaner::images {

enum class ResizeFilter {
  kBilinear,  // Image.BILINEAR (triangle, support 1): the reference scripts' default
  kLanczos,   // Image.LANCZOS (3-lobe windowed sinc): newer diffusers scripts' default
};

// Resizes to width x height (both >= 1). Same size returns a copy.
Image Resize(const Image& in, int width, int height, ResizeFilter filter = ResizeFilter::kBilinear);

// The part [left, left + crop_width) x [top, top + crop_height) of Resize(in, width, height),
// computed without the rest (each output pixel depends only on its own coefficients, so the
// values are the same): a crop of a large resize costs only the crop. The part must lie inside.
Image ResizeCrop(const Image& in, int width, int height, int left, int top, int crop_width,
                 int crop_height, ResizeFilter filter = ResizeFilter::kBilinear);

}  // namespace gleaner::images
