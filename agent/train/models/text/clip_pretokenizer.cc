#include "agent/train/models/text/clip_pretokenizer.h"

#include "agent/train/models/text/unicode_text.h"

namespace gleaner::train::text {
namespace {

using namespace tables;

// BasicTokenizer._is_chinese_char: the CJK ideograph blocks, as transformers lists them.
bool IsCjkIdeograph(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

// One character of an IGNORECASE literal: c matches the pattern character p.
bool FoldMatches(char32_t c, char p) {
  if (c == char32_t(p)) return true;
  if (p < 'a' || p > 'z') return false;
  if (c == char32_t(p - 'a' + 'A')) return true;
  for (size_t i = 0; i < kAsciiFoldsSize; ++i) {
    if ((kAsciiFolds[i] >> 8) == c && char(kAsciiFolds[i] & 0xFF) == p) return true;
  }
  return false;
}

// Length of the literal at word[i], or 0.
size_t MatchLiteral(std::u32string_view word, size_t i, std::string_view literal) {
  if (word.size() - i < literal.size()) return 0;
  for (size_t k = 0; k < literal.size(); ++k) {
    if (!FoldMatches(word[i + k], literal[k])) return 0;
  }
  return literal.size();
}

// re.findall of the CLIP pattern over one whitespace-free word, appended to *out. The
// alternatives are tried in the pattern's order; a character none matches (U+0345, which
// IGNORECASE keeps out of both [\p{L}] and its complement) is skipped as findall does.
void FindAll(std::u32string_view word, std::vector<std::string>* out) {
  static constexpr std::string_view kLiterals[] = {
      "<|startoftext|>", "<|endoftext|>", "'s", "'t", "'re", "'ve", "'m", "'ll", "'d"};
  for (size_t i = 0; i < word.size();) {
    size_t len = 0;
    for (std::string_view lit : kLiterals) {
      if ((len = MatchLiteral(word, i, lit)) != 0) break;
    }
    if (len == 0) {
      uint8_t f = FlagsOf(word[i]);
      uint8_t run = f & kLetter ? kLetter : f & kOther ? kOther : 0;
      if (run != 0) {
        len = 1;
        while (i + len < word.size() && (FlagsOf(word[i + len]) & run)) ++len;
      } else if (f & kNumber) {
        len = 1;
      }
    }
    if (len == 0) {
      ++i;
      continue;
    }
    out->push_back(EncodeUtf8(word.substr(i, len)));
    i += len;
  }
}

}  // namespace

std::vector<std::string> ClipPreTokenize(std::u32string_view text) {
  // _clean_text and _tokenize_chinese_chars.
  std::u32string cleaned;
  cleaned.reserve(text.size());
  for (char32_t c : text) {
    uint8_t f = FlagsOf(c);
    if (f & kDrop) continue;
    if (f & kSpace) {
      cleaned.push_back(U' ');
    } else if (IsCjkIdeograph(c)) {
      cleaned.append({U' ', c, U' '});
    } else {
      cleaned.push_back(c);
    }
  }
  std::u32string normalized = ToNfc(cleaned);
  // whitespace_tokenize, lower() per word, then the pattern (which never spans a space, so it
  // can run word by word).
  std::vector<std::string> out;
  for (size_t i = 0; i < normalized.size();) {
    if (FlagsOf(normalized[i]) & (kSpace | kSplit)) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < normalized.size() && !(FlagsOf(normalized[j]) & (kSpace | kSplit))) ++j;
    FindAll(ToLower(std::u32string_view(normalized).substr(i, j - i)), &out);
    i = j;
  }
  return out;
}

}  // namespace gleaner::train::text
