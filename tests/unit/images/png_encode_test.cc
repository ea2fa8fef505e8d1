// PNG output: decodes back to the same pixels, same bytes every time, no time or text chunks.
#include "agent/train/images/png_encode.h"

#include <catch2/catch.hpp>
#include <string>

#include "agent/train/images/decode.h"
#include "tests/unit/images/writers.h"

using namespace gleaner;
using namespace gleaner::images;

TEST_CASE("EncodePng round-trips and is deterministic", "[images][png]") {
  Image im = testing::Pattern(33, 17, 5);
  Result<std::string> a = EncodePng(im);
  REQUIRE(a.ok());
  Result<std::string> b = EncodePng(im);
  REQUIRE(b.ok());
  CHECK(*a == *b);
  CHECK(a->find("tIME") == std::string::npos);
  CHECK(a->find("tEXt") == std::string::npos);
  Result<Image> back = DecodeImage(*a);
  REQUIRE(back.ok());
  CHECK(back->width == 33);
  CHECK(back->height == 17);
  CHECK(back->rgb == im.rgb);
}

TEST_CASE("EncodePng refuses an inconsistent image", "[images][png]") {
  Image bad(4, 4);
  bad.rgb.resize(5);
  CHECK(EncodePng(bad).status().code() == Code::kInvalidArgument);
  CHECK(!EncodePng(Image()).ok());
}
