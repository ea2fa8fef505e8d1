// The whole pipeline against diffusers' preprocessing as computed by Pillow: files made by
// Pillow (JPEG with EXIF rotation, CMYK JPEG, progressive grayscale JPEG, palette PNG with
// transparency, gray + alpha PNG, lossless WebP with alpha, lossy WebP with EXIF) and, in
// expected.json, the sha256 of exif_transpose -> convert("RGB") -> Resize -> [flip] ->
// CenterCrop and the SDXL time_ids (pillow/make.py). Bit-exact equality is required.
#include <catch2/catch.hpp>
#include <string>

#include "shared/native/files.h"
#include "agent/train/images/decode.h"
#include "agent/train/images/transform.h"
#include "shared/json.h"
#include "shared/sha256.h"

using namespace gleaner;
using namespace gleaner::images;

TEST_CASE("decode + resize + flip + centre crop equal Pillow's, byte for byte",
          "[images][pillow]") {
  const std::string dir = std::string(GLEANER_SOURCE_DIR) + "/tests/unit/images/pillow/";
  Result<std::string> text = files::ReadAll(dir + "expected.json");
  REQUIRE(text.ok());
  Result<Json> cases = ParseJson(*text);
  REQUIRE(cases.ok());
  REQUIRE(cases->size() >= 27);
  for (const Json& c : *cases) {
    const std::string file = c["file"].get<std::string>();
    INFO(file << " resolution " << c["resolution"] << " flip " << c["flip"] << " lanczos "
              << c["lanczos"]);
    Result<std::string> bytes = files::ReadAll(dir + "images/" + file);
    REQUIRE(bytes.ok());
    Result<Image> image = DecodeImage(*bytes);
    REQUIRE(image.ok());
    TransformOptions o;
    o.height = o.width = c["resolution"].get<int>();
    o.center_crop = true;
    o.flip_probability = c["flip"].get<bool>() ? 1.0 : 0.0;
    o.filter = c["lanczos"].get<bool>() ? ResizeFilter::kLanczos : ResizeFilter::kBilinear;
    PreparedImage p = PrepareImage(*image, o, 0);
    Image crop = TensorToImage(p.pixels.data(), o.height, o.width);
    std::string_view raw(reinterpret_cast<const char*>(crop.rgb.data()), crop.rgb.size());
    CHECK(Sha256Hex(raw) == c["sha256"].get<std::string>());
    std::vector<int64_t> want = c["time_ids"].get<std::vector<int64_t>>();
    CHECK(std::vector<int64_t>(p.time_ids.begin(), p.time_ids.end()) == want);
  }
}
