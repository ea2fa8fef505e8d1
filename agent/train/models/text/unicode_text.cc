#include "agent/train/models/text/unicode_text.h"

#include <algorithm>

namespace gleaner::train::text {
namespace {

using namespace tables;

// Hangul syllable arithmetic (Unicode §3.12).
constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr char32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount,
                   kSCount = kLCount * kNCount;

// Value of the run containing c in a (first << 8) | value run table.
uint8_t RunValue(const uint32_t* runs, size_t n, char32_t c) {
  const uint32_t key = (uint32_t(c) << 8) | 0xFF;
  const uint32_t* it = std::upper_bound(runs, runs + n, key);
  return it == runs ? 0 : uint8_t(*(it - 1) & 0xFF);
}

int CombiningClass(char32_t c) {
  return c >= 0x110000 ? 0 : RunValue(kCombiningClassRuns, kCombiningClassRunsSize, c);
}

char32_t LowerSingle(char32_t c) {
  const LowerRun* end = kLowerRuns + kLowerRunsSize;
  const LowerRun* it = std::upper_bound(kLowerRuns, end, uint32_t(c),
                                        [](uint32_t v, const LowerRun& r) { return v < r.first; });
  if (it == kLowerRuns) return c;
  const LowerRun& r = *(it - 1);
  uint32_t off = uint32_t(c) - r.first;
  if (off % r.stride != 0 || off / r.stride >= r.count) return c;
  return char32_t(int64_t(c) + r.delta);
}

// CPython's handle_capital_sigma: final form when preceded by a cased letter and not followed by
// one, skipping case-ignorable characters on both sides.
char32_t SigmaLower(std::u32string_view s, size_t i) {
  size_t j = i;
  while (j > 0 && (FlagsOf(s[j - 1]) & kCaseIgnorable)) --j;
  bool final_sigma = j > 0 && (FlagsOf(s[j - 1]) & kCased);
  if (final_sigma) {
    size_t k = i + 1;
    while (k < s.size() && (FlagsOf(s[k]) & kCaseIgnorable)) ++k;
    final_sigma = k == s.size() || !(FlagsOf(s[k]) & kCased);
  }
  return final_sigma ? 0x3C2 : 0x3C3;
}

void Decompose(char32_t c, std::u32string* out) {
  if (c >= kSBase && c < kSBase + kSCount) {
    char32_t s = c - kSBase;
    out->push_back(kLBase + s / kNCount);
    out->push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount != 0) out->push_back(kTBase + s % kTCount);
    return;
  }
  const uint64_t* end = kDecompositions + kDecompositionsSize;
  const uint64_t* it = std::lower_bound(kDecompositions, end, uint64_t(c) << 43);
  if (it == end || (*it >> 43) != c) {
    out->push_back(c);
    return;
  }
  Decompose(char32_t((*it >> 22) & 0x1FFFFF), out);
  char32_t second = char32_t((*it >> 1) & 0x1FFFFF);
  if (second != 0) Decompose(second, out);
}

// The primary composite of (a, b), or 0.
char32_t Compose(char32_t a, char32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount) {
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  }
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase &&
      b < kTBase + kTCount) {
    return a + (b - kTBase);
  }
  if (a >= 0x110000 || b >= 0x110000) return 0;
  const uint64_t key = (uint64_t(a) << 21) | b;
  const uint64_t* end = kCompositions + kCompositionsSize;
  const uint64_t* it = std::lower_bound(kCompositions, end, key << 21);
  return it != end && (*it >> 21) == key ? char32_t(*it & 0x1FFFFF) : 0;
}

}  // namespace

Result<std::u32string> DecodeUtf8(std::string_view bytes) {
  std::u32string out;
  out.reserve(bytes.size());
  const auto* s = reinterpret_cast<const unsigned char*>(bytes.data());
  const size_t n = bytes.size();
  for (size_t i = 0; i < n;) {
    unsigned char b = s[i];
    size_t len;
    char32_t cp;
    unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (b < 0x80) {
      out.push_back(b);
      ++i;
      continue;
    } else if (b >= 0xC2 && b <= 0xDF) {
      len = 2, cp = b & 0x1F;
    } else if (b >= 0xE0 && b <= 0xEF) {
      len = 3, cp = b & 0x0F;
      if (b == 0xE0) lo = 0xA0;  // overlong
      if (b == 0xED) hi = 0x9F;  // surrogates
    } else if (b >= 0xF0 && b <= 0xF4) {
      len = 4, cp = b & 0x07;
      if (b == 0xF0) lo = 0x90;  // overlong
      if (b == 0xF4) hi = 0x8F;  // above U+10FFFF
    } else {
      return Status::Invalid("invalid UTF-8 at byte " + std::to_string(i));
    }
    for (size_t k = 1; k < len; ++k) {
      unsigned char c = i + k < n ? s[i + k] : 0;
      if (k == 1 ? (c < lo || c > hi) : (c & 0xC0) != 0x80) {
        return Status::Invalid("invalid UTF-8 at byte " + std::to_string(i));
      }
      cp = (cp << 6) | (c & 0x3F);
    }
    out.push_back(cp);
    i += len;
  }
  return out;
}

std::string EncodeUtf8(std::u32string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char32_t c : text) {
    if (c < 0x80) {
      out.push_back(char(c));
    } else if (c < 0x800) {
      out.push_back(char(0xC0 | (c >> 6)));
      out.push_back(char(0x80 | (c & 0x3F)));
    } else if (c < 0x10000) {
      out.push_back(char(0xE0 | (c >> 12)));
      out.push_back(char(0x80 | ((c >> 6) & 0x3F)));
      out.push_back(char(0x80 | (c & 0x3F)));
    } else {
      out.push_back(char(0xF0 | (c >> 18)));
      out.push_back(char(0x80 | ((c >> 12) & 0x3F)));
      out.push_back(char(0x80 | ((c >> 6) & 0x3F)));
      out.push_back(char(0x80 | (c & 0x3F)));
    }
  }
  return out;
}

uint8_t FlagsOf(char32_t c) {
  return c >= 0x110000 ? 0 : RunValue(kFlagRuns, kFlagRunsSize, c);
}

std::u32string ToLower(std::u32string_view text) {
  std::u32string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    char32_t c = text[i];
    if (c == 0x3A3) {
      out.push_back(SigmaLower(text, i));
      continue;
    }
    const uint64_t* end = kLowerSpecial + kLowerSpecialSize;
    const uint64_t* it =
        std::find_if(kLowerSpecial, end, [c](uint64_t e) { return (e >> 42) == c; });
    if (it != end) {
      out.push_back(char32_t((*it >> 21) & 0x1FFFFF));
      out.push_back(char32_t(*it & 0x1FFFFF));
    } else {
      out.push_back(LowerSingle(c));
    }
  }
  return out;
}

std::u32string ToNfc(std::u32string_view text) {
  std::u32string d;
  d.reserve(text.size());
  for (char32_t c : text) Decompose(c, &d);
  // Canonical ordering: stable sort of every run of non-starters by combining class.
  for (size_t i = 0; i < d.size();) {
    if (CombiningClass(d[i]) == 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < d.size() && CombiningClass(d[j]) != 0) ++j;
    std::stable_sort(d.begin() + i, d.begin() + j,
                     [](char32_t a, char32_t b) { return CombiningClass(a) < CombiningClass(b); });
    i = j;
  }
  // Canonical composition: a character composes with the last starter unless blocked (a
  // character in between whose class is 0 or not lower than its own).
  std::u32string out;
  out.reserve(d.size());
  size_t starter = std::u32string::npos;
  int last_class = 0;
  for (char32_t c : d) {
    int cc = CombiningClass(c);
    if (starter != std::u32string::npos) {
      bool adjacent = starter + 1 == out.size();
      if (adjacent || last_class < cc) {
        if (char32_t composite = Compose(out[starter], c)) {
          out[starter] = composite;
          continue;
        }
      }
    }
    if (cc == 0) starter = out.size();
    last_class = cc;
    out.push_back(c);
  }
  return out;
}

}  // namespace gleaner::train::text
