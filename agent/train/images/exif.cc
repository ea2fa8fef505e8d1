#include "agent/train/images/exif.h"

#include <cstdint>
#include <string>

namespace gleaner::images {
namespace {

constexpr uint16_t kOrientationTag = 0x0112;
constexpr uint16_t kTypeShort = 3;
constexpr uint16_t kTypeLong = 4;
constexpr size_t kIfdEntryBytes = 12;

class TiffReader {
 public:
  TiffReader(std::string_view b, bool little) : b_(b), little_(little) {}
  // Callers check bounds first.
  uint16_t U16(size_t at) const {
    auto p = reinterpret_cast<const uint8_t*>(b_.data()) + at;
    return little_ ? uint16_t(p[0] | p[1] << 8) : uint16_t(p[0] << 8 | p[1]);
  }
  uint32_t U32(size_t at) const {
    uint32_t hi = U16(little_ ? at + 2 : at), lo = U16(little_ ? at : at + 2);
    return hi << 16 | lo;
  }

 private:
  std::string_view b_;
  bool little_;
};

Status Bad(const std::string& what) {
  return Status::Corruption("EXIF: " + what);
}

}  // namespace

Result<int> ExifOrientation(std::string_view exif) {
  constexpr std::string_view kPrefix("Exif\0\0", 6);
  if (exif.substr(0, kPrefix.size()) == kPrefix) exif.remove_prefix(kPrefix.size());
  if (exif.size() < 8) return Bad("block shorter than a TIFF header");
  bool little;
  if (exif.substr(0, 4) == std::string_view("II*\0", 4)) {
    little = true;
  } else if (exif.substr(0, 4) == std::string_view("MM\0*", 4)) {
    little = false;
  } else {
    return Bad("no TIFF header (II*/MM*)");
  }
  TiffReader r(exif, little);
  uint32_t ifd = r.U32(4);
  if (ifd < 8 || uint64_t(ifd) + 2 > exif.size()) return Bad("IFD0 offset outside the block");
  uint16_t count = r.U16(ifd);
  if (uint64_t(ifd) + 2 + uint64_t(count) * kIfdEntryBytes > exif.size()) {
    return Bad("IFD0 entry table runs past the block");
  }
  int orientation = 1;
  bool seen = false;
  for (uint32_t i = 0; i < count; ++i) {
    size_t at = ifd + 2 + size_t(i) * kIfdEntryBytes;
    if (r.U16(at) != kOrientationTag) continue;
    if (seen) return Bad("Orientation tag appears twice");
    seen = true;
    uint16_t type = r.U16(at + 2);
    uint32_t n = r.U32(at + 4);
    if (n != 1) return Bad("Orientation holds " + std::to_string(n) + " values, not 1");
    // A single value is stored inside the entry, left-aligned in the 4-byte field.
    if (type == kTypeShort) {
      orientation = r.U16(at + 8);
    } else if (type == kTypeLong) {
      uint32_t v = r.U32(at + 8);
      orientation = v > 65535 ? 0 : int(v);
    } else {
      return Bad("Orientation has TIFF type " + std::to_string(type) + ", not SHORT");
    }
  }
  return orientation;
}

}  // namespace gleaner::images
