// Ed25519 signing and verification of release envelopes (OpenSSL EVP), and the trust checks an
// agent applies before installing a release.
//
// Keys: the private key is PKCS#8 PEM (kept offline by the release operator); public keys are
// 64 lowercase hex digits of the raw 32-byte key. A key ring (pinned keys) is text with one
// public key per line; blank lines and lines starting with '#' are ignored.
// Thread-safe (no shared state).
#pragma once

#include <map>
#include <optional>
#include <string>

#include "shared/release_manifest.h"
#include "shared/status.h"

namespace gleaner::release {

struct KeyPair {
  std::string private_pem;
  std::string public_hex;
};
Result<KeyPair> GenerateKeyPair();

// Signs manifest_text (which must parse as a Manifest) with a PEM private key.
Result<Envelope> SignManifest(const std::string& private_pem, const std::string& manifest_text);

// key id -> raw 32-byte public key.
using KeyRing = std::map<std::string, std::string>;
Result<KeyRing> ParseKeyRing(const std::string& text);

// Checks the signature against the ring and parses the manifest. Unknown key id and a bad
// signature are kPermissionDenied; a malformed manifest is kInvalidArgument.
Result<Manifest> VerifyEnvelope(const Envelope& envelope, const KeyRing& ring);

// The manifest may be installed now: not expired at now_s (kPermissionDenied "expired") and
// strictly newer than the highest version ever trusted (kConflict "rollback").
Status CheckTrust(const Manifest& m, const std::optional<Version>& highest_trusted, int64_t now_s);

}  // namespace gleaner::release
