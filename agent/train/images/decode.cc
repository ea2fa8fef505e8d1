#include "agent/train/images/decode.h"

#include "agent/train/images/codecs.h"
#include "agent/train/images/exif.h"
#include "agent/train/images/orientation.h"

namespace gleaner::images {
namespace {

bool StartsWith(std::string_view s, std::string_view prefix, size_t at = 0) {
  return s.size() >= at + prefix.size() && s.substr(at, prefix.size()) == prefix;
}

}  // namespace

ImageFormat SniffImageFormat(std::string_view b) {
  using std::string_view;
  if (StartsWith(b, "\xFF\xD8\xFF")) return ImageFormat::kJpeg;
  if (StartsWith(b, "\x89PNG\r\n\x1A\n")) return ImageFormat::kPng;
  if (StartsWith(b, "RIFF") && StartsWith(b, "WEBP", 8)) return ImageFormat::kWebp;
  if (StartsWith(b, "GIF87a") || StartsWith(b, "GIF89a")) return ImageFormat::kGif;
  if (StartsWith(b, "BM")) return ImageFormat::kBmp;
  if (StartsWith(b, string_view("II*\0", 4)) || StartsWith(b, string_view("MM\0*", 4))) {
    return ImageFormat::kTiff;
  }
  if (StartsWith(b, "ftyp", 4)) {
    for (string_view brand :
         {"heic", "heix", "hevc", "heim", "heis", "mif1", "msf1", "avif", "avis"}) {
      if (StartsWith(b, brand, 8)) return ImageFormat::kHeif;
    }
  }
  if (StartsWith(b, "\xFF\x0A") || StartsWith(b, string_view("\0\0\0\x0CJXL \r\n\x87\n", 12))) {
    return ImageFormat::kJpegXl;
  }
  return ImageFormat::kUnknown;
}

const char* ImageFormatName(ImageFormat f) {
  switch (f) {
    case ImageFormat::kJpeg:
      return "JPEG";
    case ImageFormat::kPng:
      return "PNG";
    case ImageFormat::kWebp:
      return "WebP";
    case ImageFormat::kGif:
      return "GIF";
    case ImageFormat::kBmp:
      return "BMP";
    case ImageFormat::kTiff:
      return "TIFF";
    case ImageFormat::kHeif:
      return "HEIF/AVIF";
    case ImageFormat::kJpegXl:
      return "JPEG XL";
    case ImageFormat::kUnknown:
      break;
  }
  return "unknown";
}

bool IsDecodable(ImageFormat f) {
  return f == ImageFormat::kJpeg || f == ImageFormat::kPng || f == ImageFormat::kWebp;
}

Status CheckDimensions(int64_t width, int64_t height, const DecodeLimits& limits) {
  if (width <= 0 || height <= 0)
    return Status::Corruption("image has no pixels (0 width or height)");
  if (width > limits.max_side || height > limits.max_side || width * height > limits.max_pixels) {
    return Status(Code::kTooLarge,
                  "image is " + std::to_string(width) + "x" + std::to_string(height) +
                      ", over the limit of " + std::to_string(limits.max_side) + " px a side and " +
                      std::to_string(limits.max_pixels) + " pixels (decompression bomb guard)");
  }
  return Status::Ok();
}

Result<Image> DecodeImage(std::string_view bytes, const DecodeLimits& limits) {
  ImageFormat format = SniffImageFormat(bytes);
  Result<internal::DecodedFile> d = Status::Invalid("");
  switch (format) {
    case ImageFormat::kJpeg:
      d = internal::DecodeJpeg(bytes, limits);
      break;
    case ImageFormat::kPng:
      d = internal::DecodePng(bytes, limits);
      break;
    case ImageFormat::kWebp:
      d = internal::DecodeWebp(bytes, limits);
      break;
    case ImageFormat::kUnknown:
      return Status::Invalid("not an image this trainer reads (JPEG, PNG or WebP)");
    default:
      return Status::Invalid(std::string(ImageFormatName(format)) +
                             " images are not supported (JPEG, PNG or WebP)");
  }
  if (!d.ok()) return d.status();
  // An unreadable EXIF block is ignored, as Pillow ignores it: the pixels stay as stored.
  int orientation = 1;
  if (!d->exif.empty()) {
    Result<int> o = ExifOrientation(d->exif);
    if (o.ok()) orientation = *o;
  }
  if (orientation < 2 || orientation > 8) return std::move(d->image);
  return ApplyOrientation(d->image, orientation);
}

}  // namespace gleaner::images
