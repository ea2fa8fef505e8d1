// Signed agent releases: the manifest, the signed envelope that carries it, and versions.
//
// Wire format (docs/agent.md "How updates are verified"):
//   envelope = {"manifest": "<manifest JSON text>", "key_id": "<16 hex>", "signature": "<128 hex>"}
//   manifest = {"version": "MAJOR.MINOR.PATCH", "channel": "stable", "expires": <unix seconds>,
//               "artifacts": {"<platform>": {"uri": "...", "length": N, "sha256": "<64 hex>"}}}
// The signature is Ed25519 over SignedBytes(manifest text): a fixed domain prefix followed by the
// manifest text exactly as carried in the envelope. The text is parsed only after the signature
// has been checked by the verifier (shared/native/release_sign.h); this file only parses.
//
// Portable (no exceptions, no I/O, no clock). Parsers are strict: unknown keys, wrong types,
// out-of-range numbers, bad hex and oversized input are InvalidArgument, never a crash.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "shared/status.h"

namespace gleaner::release {

constexpr size_t kMaxEnvelopeBytes = 64 * 1024;
constexpr int64_t kMaxArtifactBytes = int64_t(4) << 30;  // 4 GiB

// MAJOR.MINOR.PATCH, each in [0, 999999]; ordered numerically.
struct Version {
  uint32_t major = 0, minor = 0, patch = 0;
  // A single integer with the same order (major*1e12 + minor*1e6 + patch), for SQL sorting.
  int64_t Ordinal() const;
  std::string ToString() const;
  bool operator<(const Version& o) const { return Ordinal() < o.Ordinal(); }
  bool operator==(const Version& o) const { return Ordinal() == o.Ordinal(); }
};
Result<Version> ParseVersion(std::string_view text);

struct Artifact {
  std::string uri;  // http(s) URL of the binary
  int64_t length = 0;
  std::string sha256;  // lowercase hex
};

struct Manifest {
  Version version;
  std::string channel;  // [a-z0-9-]{1,32}
  int64_t expires = 0;  // unix seconds; after this the manifest is not trusted (freeze attack)
  std::map<std::string, Artifact> artifacts;  // platform ([a-z0-9_-]{1,64}) -> artifact
};
Result<Manifest> ParseManifest(std::string_view text);

struct Envelope {
  std::string manifest_text;  // exactly the signed text
  std::string key_id;         // 16 lowercase hex: first 8 bytes of sha256(raw public key)
  std::string signature;      // 64 raw bytes
};
Result<Envelope> ParseEnvelope(std::string_view text);
std::string EnvelopeToJson(const Envelope& e);

// The bytes an Ed25519 signature covers.
std::string SignedBytes(std::string_view manifest_text);
// Key id of a raw 32-byte Ed25519 public key.
std::string KeyIdOf(std::string_view raw_public_key);

// A channel or platform name is well-formed.
bool IsValidChannel(std::string_view s);
bool IsValidPlatform(std::string_view s);

}  // namespace gleaner::release
