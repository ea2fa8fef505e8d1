// libFuzzer target for the image decoders (JPEG, PNG, WebP by signature; EXIF orientation):
// any input must decode or fail with a Status, never crash, leak or read out of bounds. Small
// limits keep each run fast; whatever decodes also goes through the training transform.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "agent/train/images/decode.h"
#include "agent/train/images/transform.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gleaner::images;
  DecodeLimits limits;
  limits.max_side = 2048;
  limits.max_pixels = 1 << 20;
  limits.max_jpeg_scans = 64;
  auto r = DecodeImage(std::string_view(reinterpret_cast<const char*>(data), size), limits);
  if (!r.ok()) return 0;
  if (r->width < 1 || r->height < 1 || r->width > 2048 || r->height > 2048) abort();
  if (r->rgb.size() != size_t(r->width) * size_t(r->height) * 3) abort();
  TransformOptions t;
  t.height = t.width = 8;
  t.flip_probability = 0.5;
  PreparedImage p = PrepareImage(*r, t, size);
  if (p.pixels.size() != 3 * 8 * 8) abort();
  for (float v : p.pixels) {
    if (!(v >= -1.0f && v <= 1.0f)) abort();
  }
  return 0;
}
