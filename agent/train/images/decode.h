// Decoding JPEG, PNG and WebP files into RGB images, as the reference trainers see them.
//
// The reference (diffusers' training scripts) opens a file with Pillow, applies
// `ImageOps.exif_transpose` and `.convert("RGB")`. DecodeImage does the same with Debian's
// libraries (libjpeg-turbo, libpng, libwebp):
//   - the format is told by the first bytes, never by the file name;
//   - EXIF orientation 2..8 (JPEG APP1, PNG eXIf, WebP EXIF) is applied; 1, a missing tag, an
//     out-of-range value or an unreadable EXIF block leave the pixels as stored (as Pillow);
//   - grayscale becomes R = G = B; palette colours are looked up; alpha is dropped, never
//     composited (Pillow's RGBA/LA/P -> RGB); 16-bit samples keep their high byte;
//   - 4-channel JPEGs (CMYK, YCCK) are read with Adobe's inverted polarity, as Pillow assumes
//     for every CMYK JPEG, and converted with Pillow's CMYK -> RGB formula;
//   - JPEGs decode with libjpeg's defaults (ISLOW DCT, fancy upsampling), as Pillow's do.
// Before any pixel buffer is allocated the header's dimensions are checked against `limits`
// (decompression bombs). Corrupt or truncated input, unsupported formats (GIF, BMP, TIFF,
// HEIF/AVIF, JPEG XL, animated WebP) and oversized images are a Status (kCorruption,
// kInvalidArgument or kTooLarge) with a one-line reason; the caller prefixes the file's name.
// Never crashes or aborts on any input. Thread-safe (no shared state).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "agent/train/images/image.h"
#include "shared/status.h"

namespace gleaner::images {

enum class ImageFormat { kUnknown, kJpeg, kPng, kWebp, kGif, kBmp, kTiff, kHeif, kJpegXl };

// What the first bytes say the file is (12 bytes are enough).
ImageFormat SniffImageFormat(std::string_view head);
// "JPEG", "PNG", ... ; "unknown" for kUnknown.
const char* ImageFormatName(ImageFormat f);
// True for the formats DecodeImage reads.
bool IsDecodable(ImageFormat f);

struct DecodeLimits {
  int max_side = 8192;              // width and height, each
  int64_t max_pixels = 40'000'000;  // width * height
  int max_jpeg_scans = 256;         // progressive JPEG scans (CPU bomb guard)
};

// Checks a header's dimensions against the limits (kTooLarge, or kCorruption when not positive).
Status CheckDimensions(int64_t width, int64_t height, const DecodeLimits& limits);

// Decodes a whole file held in memory into oriented RGB.
Result<Image> DecodeImage(std::string_view bytes, const DecodeLimits& limits = {});

}  // namespace gleaner::images
