// Short-lived URLs scoped to one object and one method, for agents and developers (DESIGN §2.5).
//
// Built-in store (config.s3 disabled): the native/edge shell serves /blobs/<key>:
//   {public_url}/blobs/<key>?m=PUT&exp=<unix s>&max=<bytes>[&sha=<sha256 hex>]&sig=<hex>
//   {public_url}/blobs/<key>?m=GET&exp=<unix s>&sig=<hex>
//   sig = hex HMAC-SHA256(blob_signing_key,
//           "gleaner-blob-v1\n" + m + "\n" + key + "\n" + exp + "\n" + max + "\n" + sha)
//   (max and sha are "" when absent). VerifyBlobUrl checks it in constant time.
// S3 (config.s3 enabled): SigV4 presigned URLs (s3_presign.h); S3 enforces them.
// Keys are made of segments [A-Za-z0-9._-]+ separated by '/', so they need no escaping.
#pragma once

#include <cstdint>
#include <string>

#include "coordinator/core/config.h"
#include "coordinator/core/coordinator.h"

namespace gleaner::core {

struct MintedUrl {
  std::string url;
  int64_t expires_at_ms = 0;
};

// PUT URL for key, at most max_size bytes; sha256 ("" = unknown) is enforced by the built-in
// store when given.
MintedUrl PutUrl(const CoreConfig& config, const std::string& key, int64_t max_size,
                 const std::string& sha256, int64_t now_ms);
MintedUrl GetUrl(const CoreConfig& config, const std::string& key, int64_t now_ms);

// Checks a built-in blob URL. Errors are PermissionDenied (403) naming the problem.
Result<BlobGrant> VerifyBlobUrl(const CoreConfig& config, const std::string& method,
                                const std::string& path, const std::string& query, int64_t now_ms);

// True for keys the core mints: 1..512 bytes, '/'-separated segments of [A-Za-z0-9._-],
// no empty, "." or ".." segment.
bool IsValidBlobKey(const std::string& key);

// A file name safe inside a key: [A-Za-z0-9._-] kept, others '_', no leading '.', <= 128 bytes,
// "file" if nothing is left.
std::string SanitizeName(const std::string& name);

// True if name is already a safe name (what SanitizeName would return unchanged).
bool IsSafeName(const std::string& name);

}  // namespace gleaner::core
