// Decoding real JPEG, PNG and WebP files (written by the same libraries in writers.cc) into RGB,
// with Pillow's conversions, EXIF orientation and the decompression-bomb guard.
#include "agent/train/images/decode.h"

#include <png.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>

#include "agent/train/images/orientation.h"
#include "tests/unit/images/writers.h"

using namespace gleaner;
using namespace gleaner::images;
using namespace gleaner::images::testing;

namespace {

int MaxDiff(const Image& a, const Image& b) {
  REQUIRE(a.width == b.width);
  REQUIRE(a.height == b.height);
  int worst = 0;
  for (size_t i = 0; i < a.rgb.size(); ++i) worst = std::max(worst, std::abs(a.rgb[i] - b.rgb[i]));
  return worst;
}

double MeanDiff(const Image& a, const Image& b) {
  double sum = 0;
  for (size_t i = 0; i < a.rgb.size(); ++i) sum += std::abs(a.rgb[i] - b.rgb[i]);
  return sum / double(a.rgb.size());
}

Image Decoded(const std::string& bytes, const DecodeLimits& limits = {}) {
  Result<Image> r = DecodeImage(bytes, limits);
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  return std::move(*r);
}

// Interleaved samples of an image, `channels` per pixel, each from f(x, y, c).
template <typename F>
std::vector<uint8_t> Samples(int w, int h, int channels, int bytes_per_sample, F f) {
  std::vector<uint8_t> s;
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      for (int c = 0; c < channels; ++c) {
        int v = f(x, y, c);
        if (bytes_per_sample == 2) s.push_back(uint8_t(v >> 8));
        s.push_back(uint8_t(v & 0xFF));
      }
    }
  }
  return s;
}

}  // namespace

TEST_CASE("the format is told by the first bytes", "[images][decode]") {
  Image im = Pattern(8, 8);
  CHECK(SniffImageFormat(WriteJpeg(im)) == ImageFormat::kJpeg);
  PngSpec p{8, 8, PNG_COLOR_TYPE_RGB, 8, false, im.rgb};
  CHECK(SniffImageFormat(WritePng(p)) == ImageFormat::kPng);
  CHECK(SniffImageFormat(WriteWebp(im, true)) == ImageFormat::kWebp);
  CHECK(SniffImageFormat("GIF89a....") == ImageFormat::kGif);
  CHECK(SniffImageFormat("BM......") == ImageFormat::kBmp);
  CHECK(SniffImageFormat(std::string("\0\0\0\x1c"
                                     "ftypheic",
                                     12)) == ImageFormat::kHeif);
  CHECK(SniffImageFormat(std::string("\0\0\0\x1c"
                                     "ftypavif",
                                     12)) == ImageFormat::kHeif);
  CHECK(SniffImageFormat("hello") == ImageFormat::kUnknown);
  CHECK(SniffImageFormat("") == ImageFormat::kUnknown);
}

TEST_CASE("JPEG: RGB baseline and progressive, grayscale", "[images][decode]") {
  Image im = Pattern(48, 32);
  Image baseline = Decoded(WriteJpeg(im));
  CHECK(MeanDiff(baseline, im) < 2.5);
  JpegSpec prog;
  prog.progressive = true;
  Image progressive = Decoded(WriteJpeg(im, prog));
  CHECK(MeanDiff(progressive, im) < 2.5);
  JpegSpec gray;
  gray.components = 1;
  Image g = Decoded(WriteJpeg(im, gray));
  double sum = 0;
  for (int y = 0; y < g.height; ++y) {
    for (int x = 0; x < g.width; ++x) {
      const uint8_t* p = g.pixel(x, y);
      REQUIRE(p[0] == p[1]);
      REQUIRE(p[1] == p[2]);
      sum += std::abs(p[0] - im.pixel(x, y)[0]);
    }
  }
  CHECK(sum / (g.width * g.height) < 2.5);
}

TEST_CASE("JPEG: CMYK and YCCK read with Adobe polarity and Pillow's formula", "[images][decode]") {
  // Flat colours survive JPEG almost exactly. Stored values are inverted (Photoshop's way).
  const int c = 40, m = 160, y = 220, k = 30;
  std::vector<uint8_t> stored;
  for (int i = 0; i < 16 * 16; ++i) {
    stored.insert(stored.end(),
                  {uint8_t(255 - c), uint8_t(255 - m), uint8_t(255 - y), uint8_t(255 - k)});
  }
  auto expect = [&](int v) { return (255 - v) * (255 - k) / 255.0; };
  for (bool ycck : {false, true}) {
    JpegSpec spec;
    spec.components = 4;
    spec.cmyk = stored;
    spec.ycck = ycck;
    Image rgb = Decoded(WriteJpeg(Image(16, 16), spec));
    INFO("ycck " << ycck);
    for (int i = 0; i < 16 * 16; ++i) {
      REQUIRE(std::abs(rgb.rgb[i * 3 + 0] - expect(c)) <= 3);
      REQUIRE(std::abs(rgb.rgb[i * 3 + 1] - expect(m)) <= 3);
      REQUIRE(std::abs(rgb.rgb[i * 3 + 2] - expect(y)) <= 3);
    }
  }
}

TEST_CASE("PNG: every colour type and depth becomes RGB as Pillow's convert(\"RGB\")",
          "[images][decode]") {
  const int w = 7, h = 5;
  auto value = [](int x, int y, int c) { return (x * 40 + y * 13 + c * 70) % 256; };
  Image want(w, h);
  for (int yy = 0; yy < h; ++yy) {
    for (int xx = 0; xx < w; ++xx) {
      for (int c = 0; c < 3; ++c) want.pixel(xx, yy)[c] = uint8_t(value(xx, yy, c));
    }
  }
  SECTION("RGB 8-bit, plain and interlaced") {
    for (bool interlaced : {false, true}) {
      PngSpec p{w, h, PNG_COLOR_TYPE_RGB, 8, interlaced, Samples(w, h, 3, 1, value)};
      CHECK(MaxDiff(Decoded(WritePng(p)), want) == 0);
    }
  }
  SECTION("RGBA: alpha dropped, not composited") {
    PngSpec p{w, h, PNG_COLOR_TYPE_RGBA, 8, false, Samples(w, h, 4, 1, [&](int x, int y, int c) {
                return c == 3 ? x * 30 : value(x, y, c);
              })};
    CHECK(MaxDiff(Decoded(WritePng(p)), want) == 0);
  }
  SECTION("16-bit RGB and RGBA keep the high byte") {
    auto v16 = [&](int x, int y, int c) { return c == 3 ? 0x1234 : value(x, y, c) << 8 | 0xAB; };
    PngSpec p{w, h, PNG_COLOR_TYPE_RGB, 16, false, Samples(w, h, 3, 2, v16)};
    CHECK(MaxDiff(Decoded(WritePng(p)), want) == 0);
    PngSpec q{w, h, PNG_COLOR_TYPE_RGBA, 16, false, Samples(w, h, 4, 2, v16)};
    CHECK(MaxDiff(Decoded(WritePng(q)), want) == 0);
  }
  SECTION("gray 8 and 16 bits, gray + alpha") {
    auto gray = [&](int x, int y, int) { return value(x, y, 0); };
    Image g(w, h);
    for (size_t i = 0; i < g.rgb.size(); ++i) g.rgb[i] = want.rgb[i / 3 * 3];
    PngSpec p8{w, h, PNG_COLOR_TYPE_GRAY, 8, false, Samples(w, h, 1, 1, gray)};
    CHECK(MaxDiff(Decoded(WritePng(p8)), g) == 0);
    PngSpec p16{w,
                h,
                PNG_COLOR_TYPE_GRAY,
                16,
                false,
                Samples(w, h, 1, 2, [&](int x, int y, int) { return value(x, y, 0) << 8 | 0x77; })};
    CHECK(MaxDiff(Decoded(WritePng(p16)), g) == 0);
    PngSpec pa{
        w, h,     PNG_COLOR_TYPE_GRAY_ALPHA,
        8, false, Samples(w, h, 2, 1, [&](int x, int y, int c) { return c ? 0 : value(x, y, 0); })};
    CHECK(MaxDiff(Decoded(WritePng(pa)), g) == 0);
  }
  SECTION("a tRNS transparent colour on gray or RGB is ignored") {
    PngSpec p{w, h, PNG_COLOR_TYPE_RGB, 8, false, Samples(w, h, 3, 1, value)};
    p.has_trns_key = true;
    p.trns_key = {uint16_t(value(0, 0, 0)), uint16_t(value(0, 0, 1)), uint16_t(value(0, 0, 2))};
    CHECK(MaxDiff(Decoded(WritePng(p)), want) == 0);
    PngSpec q{4, 1, PNG_COLOR_TYPE_GRAY, 4, false, {0x0F, 0x8A}};
    q.has_trns_key = true;
    q.trns_key = {15, 0, 0};
    Image g = Decoded(WritePng(q));
    CHECK(g.rgb == std::vector<uint8_t>{0, 0, 0, 255, 255, 255, 136, 136, 136, 170, 170, 170});
  }
  SECTION("low bit depth gray is scaled to 0..255") {
    // 8 pixels of 1-bit gray in one byte: 10110000 -> 255 0 255 255 0 0 0 0.
    PngSpec p{8, 1, PNG_COLOR_TYPE_GRAY, 1, false, {0xB0}};
    Image im = Decoded(WritePng(p));
    const int bits[] = {255, 0, 255, 255, 0, 0, 0, 0};
    for (int x = 0; x < 8; ++x) CHECK(im.pixel(x, 0)[1] == bits[x]);
    // 2-bit: 00 01 10 11 -> 0 85 170 255.
    PngSpec q{4, 1, PNG_COLOR_TYPE_GRAY, 2, false, {0x1B}};
    Image im2 = Decoded(WritePng(q));
    for (int x = 0; x < 4; ++x) CHECK(im2.pixel(x, 0)[0] == 85 * x);
  }
  SECTION("palette: colours looked up, transparency ignored") {
    PngSpec p{3, 1, PNG_COLOR_TYPE_PALETTE, 8, false, {2, 0, 1}};
    p.palette = {{10, 20, 30}, {40, 50, 60}, {70, 80, 90}};
    p.trns = {0, 128, 255};
    Image im = Decoded(WritePng(p));
    CHECK(std::vector<uint8_t>(im.rgb.begin(), im.rgb.end()) ==
          std::vector<uint8_t>{70, 80, 90, 10, 20, 30, 40, 50, 60});
    PngSpec q{2, 1, PNG_COLOR_TYPE_PALETTE, 4, false, {0x10}};
    q.palette = {{1, 2, 3}, {4, 5, 6}};
    CHECK(Decoded(WritePng(q)).rgb == std::vector<uint8_t>{4, 5, 6, 1, 2, 3});
  }
}

TEST_CASE("WebP: lossless exact, lossy close, alpha dropped", "[images][decode]") {
  Image im = Pattern(24, 20);
  CHECK(MaxDiff(Decoded(WriteWebp(im, true)), im) == 0);
  std::vector<uint8_t> alpha(24 * 20, 128);
  CHECK(MaxDiff(Decoded(WriteWebp(im, true, alpha)), im) == 0);
  CHECK(MeanDiff(Decoded(WriteWebp(im, false)), im) < 6);
  CHECK(MeanDiff(Decoded(WriteWebp(im, false, alpha)), im) < 6);
}

TEST_CASE("EXIF orientation is applied from JPEG APP1, PNG eXIf and WebP EXIF",
          "[images][decode][exif]") {
  Image im = Pattern(12, 8);
  Image stored = Decoded(WriteJpeg(im));
  for (int o = 1; o <= 8; ++o) {
    for (bool little : {true, false}) {
      JpegSpec spec;
      spec.exif = MakeExif(o, little, true);
      Image got = Decoded(WriteJpeg(im, spec));
      INFO("orientation " << o << " little-endian " << little);
      CHECK(got.width == (o >= 5 ? 8 : 12));
      CHECK(MaxDiff(got, ApplyOrientation(stored, o)) == 0);
    }
  }
  PngSpec p{12, 8, PNG_COLOR_TYPE_RGB, 8, false, im.rgb};
  p.exif = MakeExif(6, false, false);
  CHECK(MaxDiff(Decoded(WritePng(p)), ApplyOrientation(im, 6)) == 0);
  // A PNG eXIf chunk that starts "Exif\0\0" is dropped by libpng, and Pillow cannot read it
  // either (it adds its own prefix): the pixels stay as stored. WebP accepts both forms.
  p.exif = MakeExif(8, true, true);
  CHECK(MaxDiff(Decoded(WritePng(p)), im) == 0);
  CHECK(MaxDiff(Decoded(WriteWebp(im, true, {}, MakeExif(3, true, false))),
                ApplyOrientation(im, 3)) == 0);
  CHECK(MaxDiff(Decoded(WriteWebp(im, true, {}, MakeExif(5, false, true))),
                ApplyOrientation(im, 5)) == 0);
  // Out-of-range values and unreadable EXIF blocks leave the pixels as stored (as Pillow).
  JpegSpec odd;
  odd.exif = MakeExif(9, true, true);
  CHECK(MaxDiff(Decoded(WriteJpeg(im, odd)), stored) == 0);
  odd.exif = std::string("Exif\0\0", 6) + "garbage that is not TIFF";
  CHECK(MaxDiff(Decoded(WriteJpeg(im, odd)), stored) == 0);
}

TEST_CASE("orientation transforms equal Pillow's transposes", "[images][exif]") {
  // A 3x2 image with pixel values 0..5; expected R values from Pillow 9.4's Image.transpose.
  Image im(3, 2);
  for (int i = 0; i < 6; ++i) im.rgb[size_t(i) * 3] = uint8_t(i);
  const std::vector<std::vector<int>> want = {{},
                                              {0, 1, 2, 3, 4, 5},
                                              {2, 1, 0, 5, 4, 3},
                                              {5, 4, 3, 2, 1, 0},
                                              {3, 4, 5, 0, 1, 2},
                                              {0, 3, 1, 4, 2, 5},
                                              {3, 0, 4, 1, 5, 2},
                                              {5, 2, 4, 1, 3, 0},
                                              {2, 5, 1, 4, 0, 3}};
  for (int o = 1; o <= 8; ++o) {
    Image t = ApplyOrientation(im, o);
    CHECK(t.width == (o >= 5 ? 2 : 3));
    std::vector<int> got;
    for (size_t i = 0; i < 6; ++i) got.push_back(t.rgb[i * 3]);
    CHECK(got == want[size_t(o)]);
  }
}

TEST_CASE("corrupt, truncated and unsupported files are errors, never crashes",
          "[images][decode]") {
  Image im = Pattern(40, 30);
  std::string jpeg = WriteJpeg(im);
  PngSpec p{40, 30, PNG_COLOR_TYPE_RGB, 8, false, im.rgb};
  std::string png = WritePng(p);
  std::string webp = WriteWebp(im, false);
  struct Case {
    std::string bytes;
    Code code;
    const char* words;
  } cases[] = {
      {jpeg.substr(0, jpeg.size() / 2), Code::kCorruption, "truncated JPEG"},
      {jpeg.substr(0, 200), Code::kCorruption, "truncated JPEG"},
      {png.substr(0, png.size() / 2), Code::kCorruption, "truncated PNG"},
      {png.substr(0, 40), Code::kCorruption, "truncated PNG"},
      {webp.substr(0, webp.size() / 2), Code::kCorruption, "WebP"},
      {webp.substr(0, 20), Code::kCorruption, "WebP"},
      {"this is not an image at all", Code::kInvalidArgument, "not an image"},
      {"GIF89a\x01\x00\x01\x00", Code::kInvalidArgument, "GIF images are not supported"},
      {std::string("\xFF\xD8\xFF") + std::string(100, '\x00'), Code::kCorruption, "JPEG"},
  };
  for (const Case& c : cases) {
    Result<Image> r = DecodeImage(c.bytes);
    INFO(c.words << " -> " << r.status().ToString());
    REQUIRE(!r.ok());
    CHECK(r.status().code() == c.code);
    CHECK(r.status().message().find(c.words) != std::string::npos);
  }
  // Flipped bytes in the middle of the data: whatever the library makes of it, no crash.
  for (std::string bytes : {jpeg, png, webp}) {
    for (size_t at = bytes.size() / 3; at < bytes.size(); at += bytes.size() / 7) {
      bytes[at] = char(~bytes[at]);
      (void)DecodeImage(bytes);
    }
  }
}

TEST_CASE("huge dimensions are refused from the header, before any allocation",
          "[images][decode]") {
  Image im = Pattern(64, 48);
  // A PNG whose header claims 100000 x 100000 (10 gigapixels) with almost no data.
  PngSpec p{64, 48, PNG_COLOR_TYPE_RGB, 8, false, im.rgb};
  Result<Image> bomb = DecodeImage(PatchedPngSize(WritePng(p), 100000, 100000));
  REQUIRE(!bomb.ok());
  CHECK(bomb.status().code() == Code::kTooLarge);
  CHECK(bomb.status().message().find("100000x100000") != std::string::npos);
  // A JPEG whose SOF claims 60000 x 60000.
  std::string jpeg = WriteJpeg(im);
  size_t sof = jpeg.find("\xFF\xC0");
  REQUIRE(sof != std::string::npos);
  jpeg[sof + 5] = char(0xEA), jpeg[sof + 6] = char(0x60);  // height 60000
  jpeg[sof + 7] = char(0xEA), jpeg[sof + 8] = char(0x60);  // width 60000
  Result<Image> jbomb = DecodeImage(jpeg);
  REQUIRE(!jbomb.ok());
  CHECK(jbomb.status().code() == Code::kTooLarge);
  // Every format against configured limits: side and pixel count.
  DecodeLimits side{32, 40'000'000, 256};
  DecodeLimits area{8192, 64 * 47, 256};
  for (const std::string& bytes : {WriteJpeg(im), WritePng(p), WriteWebp(im, true)}) {
    for (const DecodeLimits& l : {side, area}) {
      Result<Image> r = DecodeImage(bytes, l);
      REQUIRE(!r.ok());
      CHECK(r.status().code() == Code::kTooLarge);
      CHECK(r.status().message().find("64x48") != std::string::npos);
    }
    CHECK(DecodeImage(bytes, DecodeLimits{64, 64 * 48, 256}).ok());
  }
}

TEST_CASE("progressive JPEGs with too many scans are refused", "[images][decode]") {
  JpegSpec spec;
  spec.progressive = true;
  std::string jpeg = WriteJpeg(Pattern(16, 16), spec);
  CHECK(DecodeImage(jpeg).ok());
  Result<Image> r = DecodeImage(jpeg, DecodeLimits{8192, 40'000'000, 2});
  REQUIRE(!r.ok());
  CHECK(r.status().message().find("more than 2 scans") != std::string::npos);
}
