#include "agent/train/models/text/sentencepiece_normalizer.h"

#include <algorithm>
#include <cstring>

namespace gleaner::train::text {
namespace {

// The char map builder keeps at most this many rules on one prefix path; SentencePiece looks at
// no more, so neither does this reader.
constexpr size_t kMaxPrefixMatches = 32;

// Darts-clone unit fields.
bool HasLeaf(uint32_t unit) {
  return ((unit >> 8) & 1) == 1;
}
uint32_t Value(uint32_t unit) {
  return unit & ((1U << 31) - 1);
}
uint32_t Label(uint32_t unit) {
  return unit & ((1U << 31) | 0xFF);
}
uint32_t Offset(uint32_t unit) {
  return (unit >> 10) << ((unit & (1U << 9)) >> 6);
}

bool IsTrail(uint8_t b) {
  return (b & 0xC0) == 0x80;
}

// Length of the valid UTF-8 character at the start of `s` (non-empty), or 0 when the first byte
// starts none (overlong forms, surrogates and code points above U+10FFFF are invalid).
size_t ValidCharLength(std::string_view s) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const size_t n = s.size();
  if (p[0] < 0x80) return 1;
  if ((p[0] & 0xE0) == 0xC0) {
    if (n < 2 || !IsTrail(p[1])) return 0;
    uint32_t c = (uint32_t(p[0] & 0x1F) << 6) | (p[1] & 0x3F);
    return c >= 0x80 ? 2 : 0;
  }
  if ((p[0] & 0xF0) == 0xE0) {
    if (n < 3 || !IsTrail(p[1]) || !IsTrail(p[2])) return 0;
    uint32_t c = (uint32_t(p[0] & 0x0F) << 12) | (uint32_t(p[1] & 0x3F) << 6) | (p[2] & 0x3F);
    return c >= 0x800 && (c < 0xD800 || c > 0xDFFF) ? 3 : 0;
  }
  if ((p[0] & 0xF8) == 0xF0) {
    if (n < 4 || !IsTrail(p[1]) || !IsTrail(p[2]) || !IsTrail(p[3])) return 0;
    uint32_t c = (uint32_t(p[0] & 0x07) << 18) | (uint32_t(p[1] & 0x3F) << 12) |
                 (uint32_t(p[2] & 0x3F) << 6) | (p[3] & 0x3F);
    return c >= 0x10000 && c <= 0x10FFFF ? 4 : 0;
  }
  return 0;
}

Result<std::string> DecodeBase64(std::string_view in) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  if (in.size() % 4 != 0) return Status::Invalid("its length is not a multiple of 4");
  std::string out;
  out.reserve(in.size() / 4 * 3);
  for (size_t i = 0; i < in.size(); i += 4) {
    int v[4];
    int pad = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = in[i + size_t(k)];
      const bool last = i + 4 == in.size();
      if (c == '=' && last && k >= 2 && (k == 3 || in[i + 3] == '=')) {
        v[k] = 0;
        ++pad;
        continue;
      }
      v[k] = value(c);
      if (v[k] < 0 || pad > 0) {
        return Status::Invalid("byte " + std::to_string(i + size_t(k)) + " is not base64");
      }
    }
    const uint32_t bits =
        uint32_t(v[0]) << 18 | uint32_t(v[1]) << 12 | uint32_t(v[2]) << 6 | uint32_t(v[3]);
    out.push_back(char(bits >> 16));
    if (pad < 2) out.push_back(char(bits >> 8 & 0xFF));
    if (pad < 1) out.push_back(char(bits & 0xFF));
  }
  return out;
}

}  // namespace

Result<SentencePieceNormalizer> SentencePieceNormalizer::FromCharsMap(std::string_view blob,
                                                                      bool add_dummy_prefix) {
  SentencePieceNormalizer n;
  n.add_dummy_prefix_ = add_dummy_prefix;
  if (blob.empty()) return n;
  if (blob.size() <= 4) return Status::Invalid("the char map is shorter than its header");
  const auto* b = reinterpret_cast<const uint8_t*>(blob.data());
  const uint64_t trie_size =
      uint64_t(b[0]) | uint64_t(b[1]) << 8 | uint64_t(b[2]) << 16 | uint64_t(b[3]) << 24;
  if (trie_size + 4 > blob.size()) {
    return Status::Invalid("the char map's trie size (" + std::to_string(trie_size) +
                           " bytes) exceeds the blob (" + std::to_string(blob.size()) + " bytes)");
  }
  if (trie_size < 4 || trie_size % 4 != 0) {
    return Status::Invalid("the char map's trie size (" + std::to_string(trie_size) +
                           " bytes) is not a positive multiple of 4");
  }
  auto map = std::make_shared<CharsMap>();
  map->units.resize(size_t(trie_size / 4));
  for (size_t i = 0; i < map->units.size(); ++i) {
    const uint8_t* u = b + 4 + 4 * i;
    map->units[i] =
        uint32_t(u[0]) | uint32_t(u[1]) << 8 | uint32_t(u[2]) << 16 | uint32_t(u[3]) << 24;
  }
  map->strings.assign(blob.substr(size_t(4 + trie_size)));
  map->strings.push_back('\0');  // every value offset reads a terminated string
  n.map_ = std::move(map);
  return n;
}

Result<SentencePieceNormalizer> SentencePieceNormalizer::FromBase64CharsMap(std::string_view b64,
                                                                            bool add_dummy_prefix) {
  Result<std::string> blob = DecodeBase64(b64);
  if (!blob.ok()) {
    return Status::Invalid("precompiled_charsmap is not base64: " + blob.status().message());
  }
  return FromCharsMap(*blob, add_dummy_prefix);
}

std::pair<std::string_view, size_t> SentencePieceNormalizer::NormalizePrefix(
    std::string_view input) const {
  size_t longest = 0;
  uint32_t longest_value = 0;
  if (map_ != nullptr) {
    const std::vector<uint32_t>& a = map_->units;
    size_t matches = 0;
    size_t pos = Offset(a[0]);
    for (size_t i = 0; i < input.size() && matches < kMaxPrefixMatches; ++i) {
      const uint8_t c = uint8_t(input[i]);
      pos ^= c;
      if (pos >= a.size() || Label(a[pos]) != c) break;
      const uint32_t unit = a[pos];
      pos ^= Offset(unit);
      if (HasLeaf(unit)) {
        if (pos >= a.size()) break;
        ++matches;
        longest = i + 1;  // matches come shortest first
        longest_value = Value(a[pos]);
      }
    }
  }
  if (longest > 0 && longest_value < map_->strings.size()) {
    const char* s = map_->strings.data() + longest_value;
    return {std::string_view(s, std::strlen(s)), longest};
  }
  if (longest > 0) return {std::string_view(), longest};  // a value outside the blob: dropped
  const size_t len = ValidCharLength(input);
  if (len == 0) return {std::string_view("\xEF\xBF\xBD"), 1};  // U+FFFD for one bad byte
  return {input.substr(0, len), len};
}

std::string SentencePieceNormalizer::Normalize(std::string_view input) const {
  std::string out;
  // Leading blanks (whatever the char map turns into exactly " ").
  while (!input.empty()) {
    auto [rep, used] = NormalizePrefix(input);
    if (rep != " ") break;
    input.remove_prefix(used);
  }
  if (input.empty()) return out;
  out.reserve(input.size() * 3);
  if (add_dummy_prefix_) out.append(kSpaceSymbol);
  bool prev_space = true;
  while (!input.empty()) {
    auto [rep, used] = NormalizePrefix(input);
    input.remove_prefix(used);
    if (prev_space) {
      while (!rep.empty() && rep.front() == ' ') rep.remove_prefix(1);
    }
    if (rep.empty()) continue;
    for (char c : rep) {
      if (c == ' ') {
        out.append(kSpaceSymbol);
      } else {
        out.push_back(c);
      }
    }
    prev_space = rep.back() == ' ';
  }
  while (out.size() >= kSpaceSymbol.size() &&
         std::string_view(out).substr(out.size() - kSpaceSymbol.size()) == kSpaceSymbol) {
    out.resize(out.size() - kSpaceSymbol.size());
  }
  return out;
}

}  // namespace gleaner::train::text
