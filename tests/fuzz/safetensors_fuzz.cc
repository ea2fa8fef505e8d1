// libFuzzer target for the safetensors parser: any input must be accepted or rejected with a
// Status, and every accepted tensor view must lie inside the input with a consistent size.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "shared/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto r = gleaner::safetensors::Parse(bytes);
  if (!r.ok()) return 0;
  for (const auto& [name, t] : r->tensors) {
    if (t.data.size() != size_t(t.numel()) * gleaner::safetensors::DTypeSize(t.dtype)) abort();
    if (t.data.data() < bytes.data() || t.data.data() + t.data.size() > bytes.data() + size) {
      abort();
    }
  }
  // Whatever parses must serialise and parse back to the same tensors.
  std::map<std::string, gleaner::safetensors::TensorToWrite> out;
  for (const auto& [name, t] : r->tensors) out[name] = {t.dtype, t.shape, t.data};
  auto again = gleaner::safetensors::Serialize(out, r->metadata);
  if (!again.ok()) abort();
  auto r2 = gleaner::safetensors::Parse(*again);
  if (!r2.ok() || r2->tensors.size() != r->tensors.size() || r2->metadata != r->metadata) abort();
  return 0;
}
