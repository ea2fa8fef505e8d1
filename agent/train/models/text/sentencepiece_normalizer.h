// SentencePiece's text normaliser as a T5 tokenizer runs it (SentencePiece's `nmt_nfkc` spec with
// a precompiled character map): the string a Unigram model segments.
//
//   1. The precompiled char map: at each position the longest rule of its Darts double-array trie
//      that matches the input bytes replaces them (NFKC-like folding, control characters dropped,
//      every kind of blank to " "); without a rule one UTF-8 character is kept as it is, and a
//      byte that starts no valid UTF-8 sequence becomes U+FFFD.
//   2. Whitespace: leading blanks are skipped, runs of blanks collapse to one, trailing blanks
//      are dropped, every remaining " " becomes U+2581 "▁", and (add_dummy_prefix) the result
//      starts with one "▁". All-blank text normalises to "".
//
// The char map blob (`precompiled_charsmap` in tokenizer.json, base64-decoded; the same bytes as
// spiece.model's normalizer_spec): a little-endian uint32 trie size in bytes, the double array
// (uint32 units), then the replacement strings, each ended by NUL; a trie value is a byte offset
// into those strings.
//
// Contract: FromCharsMap validates the framing and returns one readable Status; lookups are
// bounds-checked, so a corrupt trie gives wrong output, never a crash. A normaliser is immutable,
// cheap to copy (shared data) and thread-safe. Normalize accepts any bytes and never fails.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "shared/status.h"

namespace gleaner::train::text {

class SentencePieceNormalizer {
 public:
  // "▁" (U+2581), SentencePiece's visible space.
  static constexpr std::string_view kSpaceSymbol = "\xe2\x96\x81";

  // Identity folding (no char map), whitespace handling only.
  SentencePieceNormalizer() = default;
  // From the decoded char map blob; an empty blob means no char map.
  static Result<SentencePieceNormalizer> FromCharsMap(std::string_view blob,
                                                      bool add_dummy_prefix = true);
  // From the blob in base64, as tokenizer.json's `precompiled_charsmap` holds it.
  static Result<SentencePieceNormalizer> FromBase64CharsMap(std::string_view b64,
                                                            bool add_dummy_prefix = true);

  // The normalised text (escaped spaces, dummy prefix) as described above.
  std::string Normalize(std::string_view input) const;

  // Step 1 alone at the start of `input` (non-empty): the replacement and how many input bytes it
  // stands for (at least 1).
  std::pair<std::string_view, size_t> NormalizePrefix(std::string_view input) const;

  bool has_chars_map() const { return map_ != nullptr; }

 private:
  struct CharsMap {
    std::vector<uint32_t> units;  // the double array
    std::string strings;          // replacement strings, NUL-terminated, plus a final NUL
  };
  std::shared_ptr<const CharsMap> map_;
  bool add_dummy_prefix_ = true;
};

}  // namespace gleaner::train::text
