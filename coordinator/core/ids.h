// Ids, tokens, nonces and cursors, all derived from the shell's per-request entropy (the core
// draws no randomness itself). Several values per request are derived with distinct labels:
// value = SHA-256(entropy || 0x00 || label).
#pragma once

#include <cstdint>
#include <string>

namespace gleaner::core {

// 64 lowercase hex characters derived from entropy and label.
std::string DeriveHex(const std::string& entropy, const std::string& label);
// "<prefix>_<16 hex>", e.g. NewId(e, "j") -> "j_3f9a0c...".
std::string NewId(const std::string& entropy, const std::string& prefix);
// Bearer token "glt_<64 hex>" (256 bits).
std::string NewToken(const std::string& entropy, const std::string& label);

// Opaque pagination cursor for (created_at, id) keyset pagination.
std::string EncodeCursor(int64_t created_at, const std::string& id);
bool DecodeCursor(const std::string& cursor, int64_t* created_at, std::string* id);

}  // namespace gleaner::core
