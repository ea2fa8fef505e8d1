// Image: an 8-bit RGB picture in memory, the one pixel format the image pipeline passes around.
//
// Contract: `rgb` holds height * width * 3 bytes, row-major, channels interleaved (R, G, B), no
// row padding. A value type: copy or move it freely; thread-compatible.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace gleaner::images {

struct Image {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> rgb;  // [height, width, 3]

  Image() = default;
  Image(int w, int h) : width(w), height(h), rgb(size_t(w) * size_t(h) * 3) {}
  uint8_t* pixel(int x, int y) { return &rgb[(size_t(y) * size_t(width) + size_t(x)) * 3]; }
  const uint8_t* pixel(int x, int y) const {
    return &rgb[(size_t(y) * size_t(width) + size_t(x)) * 3];
  }
};

}  // namespace gleaner::images
