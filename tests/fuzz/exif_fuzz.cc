// libFuzzer target for the EXIF/TIFF orientation parser: any block is read or refused with a
// Status, never read outside its bytes.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "agent/train/images/exif.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)gleaner::images::ExifOrientation(
      std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
