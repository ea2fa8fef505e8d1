// libFuzzer target for the signed-release parsers (shared/release_manifest.h): any bytes are
// tried as an envelope, a manifest and a version. Each is accepted or rejected with a Status;
// whatever is accepted keeps the documented limits and round-trips.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "shared/release_manifest.h"

namespace {

bool IsLowerHex(const std::string& s) {
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

void CheckVersion(const gleaner::release::Version& v) {
  if (v.major > 999999 || v.minor > 999999 || v.patch > 999999) abort();
  auto again = gleaner::release::ParseVersion(v.ToString());
  if (!again.ok() || !(*again == v)) abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace rel = gleaner::release;
  std::string_view text(reinterpret_cast<const char*>(data), size);

  if (auto v = rel::ParseVersion(text); v.ok()) CheckVersion(*v);

  if (auto e = rel::ParseEnvelope(text); e.ok()) {
    if (size > rel::kMaxEnvelopeBytes) abort();
    if (e->key_id.size() != 16 || !IsLowerHex(e->key_id) || e->signature.size() != 64) abort();
    auto again = rel::ParseEnvelope(rel::EnvelopeToJson(*e));
    if (!again.ok() || again->manifest_text != e->manifest_text || again->key_id != e->key_id ||
        again->signature != e->signature) {
      abort();
    }
  }

  if (auto m = rel::ParseManifest(text); m.ok()) {
    CheckVersion(m->version);
    if (!rel::IsValidChannel(m->channel) || m->artifacts.empty()) abort();
    for (const auto& [platform, a] : m->artifacts) {
      if (!rel::IsValidPlatform(platform)) abort();
      if (a.length < 0 || a.length > rel::kMaxArtifactBytes) abort();
      if (a.sha256.size() != 64 || !IsLowerHex(a.sha256) || a.uri.empty()) abort();
    }
  }
  return 0;
}
