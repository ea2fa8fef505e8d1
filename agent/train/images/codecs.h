// Internal to agent/train/images: the per-format decoders behind DecodeImage (decode.h).
//
// Each returns the stored pixels as RGB (no orientation applied) plus the file's EXIF block, if
// any, as found (TIFF bytes, possibly still prefixed with "Exif\0\0"). Contract as in decode.h:
// dimensions checked before allocation, every library error turned into a Status, never a crash.
#pragma once

#include <string>
#include <string_view>

#include "agent/train/images/decode.h"

namespace gleaner::images::internal {

struct DecodedFile {
  Image image;
  std::string exif;
};

Result<DecodedFile> DecodeJpeg(std::string_view bytes, const DecodeLimits& limits);
Result<DecodedFile> DecodePng(std::string_view bytes, const DecodeLimits& limits);
Result<DecodedFile> DecodeWebp(std::string_view bytes, const DecodeLimits& limits);

}  // namespace gleaner::images::internal
