#include "coordinator/core/ids.h"

#include "coordinator/core/context.h"
#include "shared/sha256.h"

namespace gleaner::core {

std::string DeriveHex(const std::string& entropy, const std::string& label) {
  Sha256 h;
  h.Update(entropy);
  h.Update(std::string(1, '\0'));
  h.Update(label);
  return HexEncode(h.Finish());
}

std::string NewId(const std::string& entropy, const std::string& prefix) {
  return prefix + "_" + DeriveHex(entropy, "id:" + prefix).substr(0, 16);
}

std::string NewToken(const std::string& entropy, const std::string& label) {
  return "glt_" + DeriveHex(entropy, "token:" + label);
}

std::string EncodeCursor(int64_t created_at, const std::string& id) {
  std::string raw = std::to_string(created_at) + ":" + id;
  return HexEncode(raw.data(), raw.size());
}

bool DecodeCursor(const std::string& cursor, int64_t* created_at, std::string* id) {
  std::string raw;
  if (cursor.size() > 256 || !HexDecode(cursor, &raw)) return false;
  size_t colon = raw.find(':');
  if (colon == std::string::npos || colon == 0 || colon > 19) return false;
  int64_t t = 0;
  for (size_t i = 0; i < colon; ++i) {
    if (raw[i] < '0' || raw[i] > '9') return false;
    t = t * 10 + (raw[i] - '0');
  }
  *created_at = t;
  *id = raw.substr(colon + 1);
  return IsPlainId(*id);
}

}  // namespace gleaner::core
