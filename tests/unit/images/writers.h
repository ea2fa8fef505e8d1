// Test-only writers: real image files and archives, made with the same libraries the decoders
// use (libjpeg-turbo, libpng, libwebp, zlib) and by hand where a test needs a broken one.
// Inputs are well formed; a library error aborts the test binary.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "agent/train/images/image.h"

namespace gleaner::images::testing {

// A deterministic colourful test picture.
Image Pattern(int width, int height, int salt = 0);

// EXIF (TIFF) block with one Orientation entry; `prefix` adds "Exif\0\0".
std::string MakeExif(int orientation, bool little_endian, bool prefix);

// JPEG. components: 1 (gray, from rgb's R), 3 (RGB), 4 (CMYK: the four bytes per pixel of
// `cmyk`, written as stored, with or without an Adobe marker). exif: APP1 payload (with prefix).
struct JpegSpec {
  int components = 3;
  int quality = 95;
  bool progressive = false;
  bool adobe_marker = true;
  bool ycck = false;  // CMYK stored as YCCK (Adobe transform 2)
  std::string exif;
  std::vector<uint8_t> cmyk;
};
std::string WriteJpeg(const Image& image, const JpegSpec& spec = {});

// PNG of any colour type and depth from raw samples (big-endian for 16 bits), rows packed.
struct PngSpec {
  PngSpec(int w, int h, int color, int depth, bool interlace, std::vector<uint8_t> s)
      : width(w),
        height(h),
        color_type(color),
        bit_depth(depth),
        interlaced(interlace),
        samples(std::move(s)) {}
  int width = 0, height = 0;
  int color_type = 2;  // PNG_COLOR_TYPE_*
  int bit_depth = 8;
  bool interlaced = false;
  std::vector<uint8_t> samples;                 // packed rows
  std::vector<std::array<uint8_t, 3>> palette;  // for palette images
  std::vector<uint8_t> trns;                    // palette transparency
  bool has_trns_key = false;                    // gray / RGB transparent colour (tRNS)
  std::array<uint16_t, 3> trns_key{};           // gray in [0]; RGB in [0..2]
  std::string exif;                             // eXIf chunk (before IDAT)
};
std::string WritePng(const PngSpec& spec);
// The same PNG with its header claiming another size (CRC fixed): a decompression bomb.
std::string PatchedPngSize(std::string png, uint32_t width, uint32_t height);

// WebP: lossless or lossy (quality 90); alpha (one byte per pixel) optional; EXIF via libwebpmux.
std::string WriteWebp(const Image& image, bool lossless, const std::vector<uint8_t>& alpha = {},
                      const std::string& exif = "");

// Zip, written by hand so tests can also write broken ones.
struct ZipEntry {
  ZipEntry(std::string n, std::string d, bool deflate_it = true)
      : name(std::move(n)), data(std::move(d)), deflate(deflate_it) {}
  std::string name;
  std::string data;
  bool deflate = true;
  uint16_t flags = 0;            // general purpose flags (1 = encrypted)
  uint16_t method_override = 0;  // written as the method when nonzero
  uint32_t unix_mode = 0100644;  // S_IFLNK|0777 for a symbolic link
  int64_t declared_size = -1;    // uncompressed size to declare (-1: the real one)
  int64_t local_offset = -1;     // central directory's local header offset (-1: real)
  bool write_local = true;       // false: only a central record (see local_offset)
};
struct ZipOptions {
  bool zip64 = false;  // zip64 extra fields and end records
  uint16_t disk = 0;   // nonzero: claims to be part of a split archive
};
std::string WriteZip(const std::vector<ZipEntry>& entries, const ZipOptions& options = {});
// The local header + data of a stored entry, as WriteZip writes it.
std::string ZipLocalRecord(const ZipEntry& entry);

// Tar (ustar). type: '0' file, '2' symlink, '1' hard link, '5' directory.
struct TarEntry {
  enum class LongName { kNone, kGnu, kPax };
  TarEntry(std::string n, std::string d = "", char t = '0', LongName l = LongName::kNone,
           std::string target = "")
      : name(std::move(n)), data(std::move(d)), type(t), long_name(l), link(std::move(target)) {}
  std::string name;
  std::string data;
  char type = '0';
  LongName long_name = LongName::kNone;
  std::string link;
};
std::string WriteTar(const std::vector<TarEntry>& entries);
std::string Gzip(const std::string& data);

}  // namespace gleaner::images::testing
