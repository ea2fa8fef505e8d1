// libFuzzer target for the model manifest parser (shared/model_manifest.h): any bytes are tried
// as a manifest. Each is accepted or rejected with a Status; whatever is accepted keeps the
// documented limits (safe relative paths, one source per file, lowercase sha256, sizes in
// range, a complete diffusers layout) and round-trips byte for byte.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>
#include <string_view>

#include "shared/model_manifest.h"
#include "shared/sha256.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  gleaner::Result<gleaner::ModelManifest> m = gleaner::ParseModelManifest(text);
  if (!m.ok()) return 0;
  if (size > gleaner::kMaxModelManifestBytes) abort();
  if (m->files.empty() || m->files.size() > gleaner::kMaxModelFiles) abort();
  std::set<std::string> paths;
  for (const gleaner::ModelFile& f : m->files) {
    if (!gleaner::IsValidModelPath(f.path) || !paths.insert(f.path).second) abort();
    if (f.path.find("..") == 0 || f.path[0] == '/') abort();
    if (f.uri.empty() == f.url.empty()) abort();
    if (!gleaner::IsSha256Hex(f.sha256)) abort();
    if (f.size < 0 || f.size > gleaner::kMaxModelFileBytes) abort();
  }
  if (!gleaner::CheckDiffusersLayout(m->files, false).ok()) abort();
  std::string once = gleaner::ModelManifestToJson(*m);
  gleaner::Result<gleaner::ModelManifest> again = gleaner::ParseModelManifest(once);
  if (!again.ok() || gleaner::ModelManifestToJson(*again) != once) abort();
  return 0;
}
