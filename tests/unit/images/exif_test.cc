// The strict EXIF/TIFF orientation parser: both byte orders, the "Exif\0\0" prefix, and every
// way a block can be malformed.
#include "agent/train/images/exif.h"

#include <catch2/catch.hpp>
#include <string>

#include "tests/unit/images/writers.h"

using namespace gleaner;
using namespace gleaner::images;

TEST_CASE("orientation from little- and big-endian blocks, with or without prefix",
          "[images][exif]") {
  for (int o = 0; o <= 9; ++o) {
    for (bool little : {true, false}) {
      for (bool prefix : {true, false}) {
        Result<int> r = ExifOrientation(testing::MakeExif(o, little, prefix));
        REQUIRE(r.ok());
        CHECK(*r == o);
      }
    }
  }
}

TEST_CASE("a block without the tag means orientation 1", "[images][exif]") {
  std::string b = testing::MakeExif(6, true, false);
  b[22] = 0x13;  // second entry's tag 0x0112 -> 0x0113
  Result<int> r = ExifOrientation(b);
  REQUIRE(r.ok());
  CHECK(*r == 1);
}

TEST_CASE("malformed blocks are errors that say what is wrong", "[images][exif]") {
  const std::string good = testing::MakeExif(6, true, false);
  auto error_of = [](const std::string& b) {
    Result<int> r = ExifOrientation(b);
    REQUIRE(!r.ok());
    CHECK(r.status().code() == Code::kCorruption);
    return r.status().message();
  };
  CHECK(error_of("").find("shorter than a TIFF header") != std::string::npos);
  CHECK(error_of(std::string("XX*\0\x08\0\0\0\0\0", 10)).find("no TIFF header") !=
        std::string::npos);
  std::string far = good;
  far[4] = char(0xF0);  // IFD0 offset 240, past the block
  CHECK(error_of(far).find("IFD0 offset") != std::string::npos);
  std::string many = good;
  many[8] = char(0xFF);  // 255 entries do not fit
  CHECK(error_of(many).find("entry table") != std::string::npos);
  std::string twice = good;
  twice[10] = 0x12, twice[11] = 0x01;  // first entry becomes a second Orientation
  CHECK(error_of(twice).find("twice") != std::string::npos);
  std::string type = good;
  type[24] = 2;  // ASCII
  CHECK(error_of(type).find("TIFF type 2") != std::string::npos);
  std::string count = good;
  count[26] = 2;
  CHECK(error_of(count).find("2 values") != std::string::npos);
  CHECK(error_of(good.substr(0, good.size() - 10)).find("entry table") != std::string::npos);
}

TEST_CASE("a LONG orientation is read too", "[images][exif]") {
  std::string b = testing::MakeExif(6, false, false);
  b[25] = 4;             // type LONG (big-endian u16 at 24..25)
  b[30] = 0, b[31] = 0;  // value 0x00000006 as a LONG: bytes 30..33
  b[32] = 0, b[33] = 6;
  Result<int> r = ExifOrientation(b);
  REQUIRE(r.ok());
  CHECK(*r == 6);
}
