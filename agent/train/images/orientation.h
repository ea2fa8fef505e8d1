// EXIF orientation: turning the stored pixels upright, as Pillow's `ImageOps.exif_transpose`.
//
// Orientation 1 = as stored; 2 mirror left-right; 3 rotate 180; 4 mirror top-bottom;
// 5 transpose (swap x, y); 6 rotate 90 clockwise; 7 transverse; 8 rotate 90 counter-clockwise.
// 5..8 swap width and height. Any other value leaves the image as stored. Pure function.
#pragma once

#include "agent/train/images/image.h"

namespace gleaner::images {

Image ApplyOrientation(const Image& in, int orientation);

}  // namespace gleaner::images
