// Portable SHA-256 and HMAC-SHA256 (FIPS 180-4, RFC 2104).
//
// Used where the portable core needs hashes (token hashes, blob URL signatures, SigV4, the
// synthetic job's hash chain) and must build for wasm32 without OpenSSL. Native code that hashes
// large files may use OpenSSL instead; a unit test checks that both agree.
// Thread-compatible: one Sha256 object per thread.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace gleaner {

using Digest = std::array<uint8_t, 32>;

class Sha256 {
 public:
  Sha256();
  void Update(const void* data, size_t len);
  void Update(std::string_view s) { Update(s.data(), s.size()); }
  Digest Finish();  // the object must not be used after Finish()

 private:
  void Block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t buf_len_ = 0;
  uint64_t total_ = 0;
};

Digest Sha256Of(std::string_view data);
std::string Sha256Hex(std::string_view data);  // lowercase hex
Digest HmacSha256(std::string_view key, std::string_view message);

std::string HexEncode(const void* data, size_t len);  // lowercase
inline std::string HexEncode(const Digest& d) {
  return HexEncode(d.data(), d.size());
}
// Accepts upper or lower case; false on odd length or a non-hex character.
bool HexDecode(std::string_view hex, std::string* out);
// True if s is exactly 64 lowercase hex characters.
bool IsSha256Hex(std::string_view s);

// Constant-time comparison of equal-length strings (false when lengths differ).
bool ConstantTimeEquals(std::string_view a, std::string_view b);

}  // namespace gleaner
