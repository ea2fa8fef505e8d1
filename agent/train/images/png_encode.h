// PNG encoding of RGB images (samples, previews) through libpng.
//
// Output is deterministic for a given libpng/zlib: 8-bit RGB, no interlacing, zlib level 6 with
// libpng's adaptive filtering, and no time, text, gamma or other ancillary chunk. Thread-safe.
#pragma once

#include <string>

#include "agent/train/images/image.h"
#include "shared/status.h"

namespace gleaner::images {

// The PNG file bytes of `image` (width, height >= 1, rgb of the right size, else kInvalidArgument).
Result<std::string> EncodePng(const Image& image);

}  // namespace gleaner::images
