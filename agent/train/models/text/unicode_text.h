// Unicode operations on code-point strings, exactly as CPython 3.11 performs them (the CLIP
// tokenizer reference runs there): strict UTF-8 decoding, character flags, str.lower() and
// unicodedata.normalize("NFC"). Data: unicode_tables.h (Unicode 14.0.0).
//
// Contract: pure functions, thread-safe, no allocation beyond the returned strings; inputs of any
// length and content are accepted (invalid UTF-8 is an error Status, never a crash).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "agent/train/models/text/unicode_tables.h"
#include "shared/status.h"

namespace gleaner::train::text {

// Strict UTF-8 (no overlongs, surrogates or code points above U+10FFFF); the error names the
// byte offset of the first invalid sequence.
Result<std::u32string> DecodeUtf8(std::string_view bytes);
std::string EncodeUtf8(std::u32string_view text);

// tables::Flag bits of a code point (0 for anything above U+10FFFF).
uint8_t FlagsOf(char32_t c);
// str.lower(): full lowercase mappings plus the Final_Sigma rule for U+03A3.
std::u32string ToLower(std::u32string_view text);
// unicodedata.normalize("NFC", text): canonical decomposition, canonical ordering, composition.
std::u32string ToNfc(std::u32string_view text);

}  // namespace gleaner::train::text
