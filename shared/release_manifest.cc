#include "shared/release_manifest.h"

#include "shared/json.h"
#include "shared/sha256.h"

namespace gleaner::release {
namespace {

constexpr char kDomain[] = "gleaner-release-manifest-v1\n";

bool AllOf(std::string_view s, size_t min_len, size_t max_len, const char* extra) {
  if (s.size() < min_len || s.size() > max_len) return false;
  for (char c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    for (const char* e = extra; *e != '\0' && !ok; ++e) ok = (c == *e);
    if (!ok) return false;
  }
  return true;
}

bool IsLowerHex(std::string_view s, size_t len) {
  if (s.size() != len) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

Status ParseArtifact(const std::string& platform, const Json& j, Artifact* out) {
  std::string prefix = "artifacts." + platform + ".";
  FieldReader r(j, prefix);
  if (!r.is_object()) return Status::Invalid(prefix + " must be an object");
  static const char* const kKeys[] = {"uri", "length", "sha256", nullptr};
  r.OnlyKeys(kKeys);
  r.String("uri", &out->uri, true, 2048);
  r.Int("length", &out->length, true, 1, kMaxArtifactBytes);
  r.String("sha256", &out->sha256, true, 64);
  if (!r.ok()) return r.status();
  if (out->uri.rfind("https://", 0) != 0 && out->uri.rfind("http://", 0) != 0) {
    return Status::Invalid(prefix + "uri must be an http(s) URL");
  }
  if (!IsLowerHex(out->sha256, 64)) {
    return Status::Invalid(prefix + "sha256 must be 64 lowercase hex digits");
  }
  return Status::Ok();
}

}  // namespace

int64_t Version::Ordinal() const {
  return int64_t(major) * 1000000000000LL + int64_t(minor) * 1000000LL + int64_t(patch);
}

std::string Version::ToString() const {
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

Result<Version> ParseVersion(std::string_view text) {
  uint32_t parts[3] = {0, 0, 0};
  size_t i = 0;
  for (int p = 0; p < 3; ++p) {
    if (p > 0) {
      if (i >= text.size() || text[i] != '.') break;
      ++i;
    }
    size_t start = i;
    uint32_t v = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9' && i - start < 6) {
      v = v * 10 + uint32_t(text[i] - '0');
      ++i;
    }
    if (i == start || (text[start] == '0' && i - start > 1)) {
      return Status::Invalid("version must be MAJOR.MINOR.PATCH (numbers up to 999999)");
    }
    parts[p] = v;
    if (p == 2 && i == text.size()) return Version{parts[0], parts[1], parts[2]};
  }
  return Status::Invalid("version must be MAJOR.MINOR.PATCH (numbers up to 999999)");
}

bool IsValidChannel(std::string_view s) {
  return AllOf(s, 1, 32, "-");
}
bool IsValidPlatform(std::string_view s) {
  return AllOf(s, 1, 64, "-_");
}

Result<Manifest> ParseManifest(std::string_view text) {
  if (text.size() > kMaxEnvelopeBytes) return Status::Invalid("manifest too large");
  Result<Json> parsed = ParseJson(text, 8);
  if (!parsed.ok()) return Status::Invalid("manifest: " + parsed.status().message());
  const Json& j = parsed.value();
  FieldReader r(j);
  if (!r.is_object()) return Status::Invalid("manifest must be a JSON object");
  static const char* const kKeys[] = {"version", "channel", "expires", "artifacts", nullptr};
  r.OnlyKeys(kKeys);
  std::string version;
  Manifest m;
  const Json* artifacts = nullptr;
  r.String("version", &version, true, 32);
  r.String("channel", &m.channel, true, 32);
  r.Int("expires", &m.expires, true, 1, int64_t(1) << 40);
  r.Object("artifacts", &artifacts, true);
  if (!r.ok()) return r.status();
  Result<Version> v = ParseVersion(version);
  if (!v.ok()) return v.status();
  m.version = v.value();
  if (!IsValidChannel(m.channel)) return Status::Invalid("channel must match [a-z0-9-]{1,32}");
  if (artifacts->empty()) return Status::Invalid("artifacts must name at least one platform");
  if (artifacts->size() > 32) return Status::Invalid("artifacts: at most 32 platforms");
  for (auto it = artifacts->begin(); it != artifacts->end(); ++it) {
    if (!IsValidPlatform(it.key())) {
      return Status::Invalid("artifacts: platform names must match [a-z0-9_-]{1,64}");
    }
    Artifact a;
    Status s = ParseArtifact(it.key(), it.value(), &a);
    if (!s.ok()) return s;
    m.artifacts.emplace(it.key(), a);
  }
  return m;
}

Result<Envelope> ParseEnvelope(std::string_view text) {
  if (text.size() > kMaxEnvelopeBytes) return Status::Invalid("release envelope too large");
  Result<Json> parsed = ParseJson(text, 4);
  if (!parsed.ok()) return Status::Invalid("release envelope: " + parsed.status().message());
  FieldReader r(parsed.value());
  if (!r.is_object()) return Status::Invalid("release envelope must be a JSON object");
  static const char* const kKeys[] = {"manifest", "key_id", "signature", nullptr};
  r.OnlyKeys(kKeys);
  Envelope e;
  std::string sig_hex;
  r.String("manifest", &e.manifest_text, true, kMaxEnvelopeBytes);
  r.String("key_id", &e.key_id, true, 16);
  r.String("signature", &sig_hex, true, 128);
  if (!r.ok()) return r.status();
  if (!IsLowerHex(e.key_id, 16)) return Status::Invalid("key_id must be 16 lowercase hex digits");
  if (!IsLowerHex(sig_hex, 128) || !HexDecode(sig_hex, &e.signature)) {
    return Status::Invalid("signature must be 128 lowercase hex digits");
  }
  return e;
}

std::string EnvelopeToJson(const Envelope& e) {
  Json j = Json::object();
  j["manifest"] = e.manifest_text;
  j["key_id"] = e.key_id;
  j["signature"] = HexEncode(e.signature.data(), e.signature.size());
  return DumpJson(j);
}

std::string SignedBytes(std::string_view manifest_text) {
  std::string out(kDomain);
  out.append(manifest_text.data(), manifest_text.size());
  return out;
}

std::string KeyIdOf(std::string_view raw_public_key) {
  return Sha256Hex(raw_public_key).substr(0, 16);
}

}  // namespace gleaner::release
