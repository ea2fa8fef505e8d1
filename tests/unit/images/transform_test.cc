// Resize/crop/flip/scale as diffusers' DreamBooth scripts, with seeded, order-free randomness.
#include "agent/train/images/transform.h"

#include <catch2/catch.hpp>
#include <limits>
#include <set>

#include "tests/unit/images/writers.h"

using namespace gleaner::images;

TEST_CASE("resize target: shorter side to the resolution, longer floor(res * long / short)",
          "[images][transform]") {
  CHECK(ResizedSize(600, 800, 512, 512) == std::array<int, 2>{512, 682});
  CHECK(ResizedSize(800, 600, 512, 512) == std::array<int, 2>{682, 512});
  CHECK(ResizedSize(512, 512, 512, 512) == std::array<int, 2>{512, 512});
  CHECK(ResizedSize(100, 30, 64, 64) == std::array<int, 2>{213, 64});
  // Non-square targets: the smallest aspect-kept size covering the target.
  CHECK(ResizedSize(1000, 3000, 1024, 768) == std::array<int, 2>{1024, 3072});
  CHECK(ResizedSize(1000, 1000, 1024, 768) == std::array<int, 2>{1024, 1024});
}

TEST_CASE("centre crop offsets round half to even, as Python's round()", "[images][transform]") {
  CHECK(CenterCropOffset(512, 512) == 0);
  CHECK(CenterCropOffset(513, 512) == 0);  // round(0.5) == 0
  CHECK(CenterCropOffset(514, 512) == 1);
  CHECK(CenterCropOffset(515, 512) == 2);  // round(1.5) == 2
  CHECK(CenterCropOffset(517, 512) == 2);  // round(2.5) == 2
  CHECK(CenterCropOffset(519, 512) == 4);  // round(3.5) == 4
  CHECK(CenterCropOffset(682, 512) == 85);
  CHECK(CenterCropOffset(500, 512) == 0);
}

TEST_CASE("prepared pixels are (u / 255 - 0.5) / 0.5 of the resized crop, CHW",
          "[images][transform]") {
  Image im = testing::Pattern(60, 40);
  TransformOptions o;
  o.height = o.width = 16;
  o.center_crop = true;
  PreparedImage p = PrepareImage(im, o, 0);
  // Resized to 24x16, crop left = round(8 / 2) = 4.
  CHECK(p.time_ids == std::array<int64_t, 6>{40, 60, 0, 4, 16, 16});
  CHECK_FALSE(p.flipped);
  Image want = ResizeCrop(im, 24, 16, 4, 0, 16, 16);
  REQUIRE(p.pixels.size() == 3 * 16 * 16);
  for (int c = 0; c < 3; ++c) {
    for (int y = 0; y < 16; ++y) {
      for (int x = 0; x < 16; ++x) {
        float u = want.pixel(x, y)[c];
        REQUIRE(p.pixels[size_t(c) * 256 + size_t(y) * 16 + size_t(x)] ==
                (u / 255.0f - 0.5f) / 0.5f);
      }
    }
  }
  // And back: diffusers' post-processing recovers the bytes exactly.
  CHECK(TensorToImage(p.pixels.data(), 16, 16).rgb == want.rgb);
}

TEST_CASE("flip comes before the crop, and crop coordinates are the flipped image's",
          "[images][transform]") {
  // 50x32 -> resized 25x16; centre crop left = round(9 / 2) = 4 in the flipped image, which is
  // unflipped columns [5, 21) mirrored.
  Image im = testing::Pattern(50, 32);
  TransformOptions o;
  o.height = o.width = 16;
  o.center_crop = true;
  o.flip_probability = 1.0;
  PreparedImage p = PrepareImage(im, o, 7);
  REQUIRE(p.flipped);
  CHECK(p.time_ids == std::array<int64_t, 6>{32, 50, 0, 4, 16, 16});
  Image resized = Resize(im, 25, 16);
  Image back = TensorToImage(p.pixels.data(), 16, 16);
  for (int y = 0; y < 16; ++y) {
    for (int x = 0; x < 16; ++x) {
      for (int c = 0; c < 3; ++c) REQUIRE(back.pixel(x, y)[c] == resized.pixel(20 - x, y)[c]);
    }
  }
}

TEST_CASE("random crop and flip depend only on (seed, key)", "[images][transform]") {
  Image im = testing::Pattern(40, 24);  // resized to 26x16 for 16: left in [0, 10]
  TransformOptions o;
  o.height = o.width = 16;
  o.flip_probability = 0.5;
  o.seed = 1234;
  std::set<int64_t> lefts;
  int flips = 0;
  for (uint64_t key = 0; key < 400; ++key) {
    PreparedImage p = PrepareImage(im, o, key);
    CHECK(p.time_ids[2] == 0);
    REQUIRE(p.time_ids[3] >= 0);
    REQUIRE(p.time_ids[3] <= 10);
    lefts.insert(p.time_ids[3]);
    flips += p.flipped;
    if (key < 5) {
      PreparedImage again = PrepareImage(im, o, key);
      CHECK(again.pixels == p.pixels);
      CHECK(again.time_ids == p.time_ids);
    }
  }
  CHECK(lefts.size() == 11);  // every offset occurs
  CHECK(flips > 160);
  CHECK(flips < 240);
  // Other seeds give other draws; the draws themselves are fixed for all time (every node must
  // agree), so a change to DrawU64 is caught here.
  CHECK(DrawU64(0, 0, 1) != DrawU64(1, 0, 1));
  CHECK(DrawU64(0, 0, 1) == 0x2f32a78496c67c60ull);
  CHECK(DrawU64(42, 7, 3) == 0xf55e4254d4655539ull);
  o.flip_probability = 0.0;
  for (uint64_t key = 0; key < 50; ++key) CHECK_FALSE(PrepareImage(im, o, key).flipped);
}

TEST_CASE("TensorToImage clamps and rounds half to even like numpy", "[images][transform]") {
  // x = -1 -> 0, x = 1 -> 255, out of range clamps, NaN -> 0; 127.5 rounds to 128 (even).
  const float v[3] = {-3.0f, 2.0f, 0.0f};
  Image im = TensorToImage(v, 1, 1);
  CHECK(im.rgb == std::vector<uint8_t>{0, 255, 128});
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float w[3] = {nan, -1.0f, 1.0f};
  CHECK(TensorToImage(w, 1, 1).rgb == std::vector<uint8_t>{0, 0, 255});
}
