// Resize against Pillow: expected outputs were computed with Pillow 9.4 (Debian 12's; the
// resampling code is unchanged through Pillow 11) as Image.resize on a synthetic RGB image.
#include "agent/train/images/resize.h"

#include <array>
#include <catch2/catch.hpp>
#include <string>
#include <utility>

#include "shared/sha256.h"

using namespace gleaner;
using namespace gleaner::images;

namespace {

// The synthetic image the expected values were computed from.
Image Synthetic(int w, int h) {
  Image im(w, h);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      for (int c = 0; c < 3; ++c) {
        im.pixel(x, y)[c] =
            uint8_t((x * 37 + y * 91 + c * 53 + (x * y) % 17 + ((x ^ y) & 7) * 9) & 255);
      }
    }
  }
  return im;
}

struct PillowCase {
  int in_w, in_h, out_w, out_h;
  ResizeFilter filter;
  const char* sha256;  // of Pillow's output bytes (RGB, row-major)
  int first, second, middle;
};

const PillowCase kCases[] = {
    {37, 23, 16, 10, ResizeFilter::kBilinear,
     "d8ae366b907132392557a4af2964a9a509d0299ceaab7ddc5682d377bca31328", 108, 138, 132},
    {5, 7, 12, 17, ResizeFilter::kBilinear,
     "4a6d6a139e93d4508252b53e8526c4ed691ce828dd31cf3c9710e21c9152bf35", 0, 53, 112},
    {640, 480, 512, 384, ResizeFilter::kBilinear,
     "a6fb18471dd0febea55655e75cd8f493cb4513db929c173601aa620b3db64707", 36, 89, 112},
    {97, 61, 13, 9, ResizeFilter::kBilinear,
     "03b693110e73f57a32e0327a58ac9157700f28ab95665848d7b69be342a72c48", 117, 128, 124},
    {64, 64, 64, 32, ResizeFilter::kBilinear,
     "1fecababf1443e226218b619af5f1176989552afc40338020ac6fe5514bbf0ac", 71, 124, 123},
    {64, 64, 32, 64, ResizeFilter::kBilinear,
     "151932253dc9ed2e18bfa3a4a9ba906b32fd79e3332346824dfd1a638c4bd97b", 33, 86, 137},
    {300, 200, 77, 51, ResizeFilter::kLanczos,
     "31ab24e26cc45f69c130dd624b523b72da91da846deb19a65c012b4901d6a853", 121, 133, 112},
    {9, 9, 20, 31, ResizeFilter::kLanczos,
     "c895d974dd885bcb86179a8bfe9c2f4790d6af3bf0dfe21754edbfb1fc974dc9", 0, 35, 24},
    {1, 1, 3, 2, ResizeFilter::kBilinear,
     "e4db3bfab78ac8fc96f3382ad3679b868884e6d8a569a60afca12278f37b68e9", 0, 53, 0},
    {200, 3, 7, 1, ResizeFilter::kBilinear,
     "37542253814932404460dbbffca78170c809fe3ca58006885ac3f15a3f6b06bd", 122, 124, 131},
};

std::string HashOf(const Image& im) {
  return Sha256Hex(std::string_view(reinterpret_cast<const char*>(im.rgb.data()), im.rgb.size()));
}

}  // namespace

TEST_CASE("Resize is bit-identical to Pillow (bilinear and Lanczos, down and up)",
          "[images][resize]") {
  for (const PillowCase& c : kCases) {
    Image out = Resize(Synthetic(c.in_w, c.in_h), c.out_w, c.out_h, c.filter);
    INFO(c.in_w << "x" << c.in_h << " -> " << c.out_w << "x" << c.out_h);
    REQUIRE(out.width == c.out_w);
    REQUIRE(out.height == c.out_h);
    CHECK(out.rgb[0] == c.first);
    CHECK(out.rgb[1] == c.second);
    CHECK(out.rgb[out.rgb.size() / 2] == c.middle);
    CHECK(HashOf(out) == c.sha256);
  }
}

TEST_CASE("ResizeCrop equals the same window of a full Resize", "[images][resize]") {
  Image in = Synthetic(97, 61);
  for (auto [w, h] : {std::pair{40, 25}, {150, 94}, {97, 30}, {50, 61}, {97, 61}}) {
    Image full = Resize(in, w, h);
    for (auto [left, top, cw, ch] :
         {std::array{0, 0, w, h}, {3, 2, 20, 11}, {w - 7, h - 5, 7, 5}, {1, 0, 1, h}}) {
      Image part = ResizeCrop(in, w, h, left, top, cw, ch);
      INFO(w << "x" << h << " window " << left << "," << top << " " << cw << "x" << ch);
      REQUIRE(part.width == cw);
      REQUIRE(part.height == ch);
      bool same = true;
      for (int y = 0; y < ch; ++y) {
        for (int x = 0; x < cw; ++x) {
          for (int c = 0; c < 3; ++c)
            same &= part.pixel(x, y)[c] == full.pixel(left + x, top + y)[c];
        }
      }
      CHECK(same);
    }
  }
}
