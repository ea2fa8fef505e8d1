// AWS Signature Version 4 presigned URLs (query-string authentication) for S3-compatible stores
// (S3, R2, MinIO, B2), computed with the portable SHA-256/HMAC so native and edge shells agree.
// Signed headers: host only; payload UNSIGNED-PAYLOAD. Path-style (endpoint/bucket/key) or
// virtual-hosted style (bucket.endpoint/key) per S3Config::path_style.
#pragma once

#include <cstdint>
#include <string>

#include "coordinator/core/config.h"

namespace gleaner::core {

// Presigned URL for method ("GET" or "PUT") on key, valid for expires_s seconds (1..604800)
// from now_ms.
std::string PresignS3(const S3Config& s3, const std::string& method, const std::string& key,
                      int64_t now_ms, int64_t expires_s);

}  // namespace gleaner::core
