// A SentencePiece Unigram model: the segmentation of normalised text (sentencepiece_normalizer.h)
// into vocabulary pieces with the highest total score, exactly as SentencePiece's encoder finds
// it (its "optimized" Viterbi, the default since 0.1.9x):
//
//   - positions advance one UTF-8 character at a time (the character length is read from the
//     lead byte alone); every piece that matches the bytes from a position is a candidate;
//   - scores add up in single precision, as SentencePiece's float scores do; between equal
//     totals the path found first (earlier start, then shorter piece) wins;
//   - a character that starts no single-character piece may be covered by the unknown id at
//     (lowest piece score - 10); a run of adjacent unknowns is reported as one unknown.
//
// Only matchable pieces (SentencePiece's NORMAL pieces: not the control tokens, not the unknown
// piece) take part, and only they set the lowest score.
//
// Contract: Build validates its input and returns one readable Status; a model is immutable,
// cheap to copy (shared data) and thread-safe. Encode takes any bytes and never fails; its time
// is linear in the text length times the longest piece.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "shared/status.h"

namespace gleaner::train::text {

class UnigramModel {
 public:
  struct Piece {
    std::string text;
    float score = 0;
    bool matchable = true;  // false for control tokens; the unknown piece never matches
  };
  // One piece of a segmentation: its id and the bytes of the normalised text it covers.
  struct Token {
    int32_t id = 0;
    std::string_view surface;
  };

  UnigramModel() = default;
  // Pieces in id order; unk_id must be one of them. Two matchable pieces with the same text and
  // an empty matchable piece are errors.
  static Result<UnigramModel> Build(const std::vector<Piece>& pieces, int32_t unk_id);

  // The best segmentation of `normalized` (views into it); empty text gives no tokens.
  std::vector<Token> Encode(std::string_view normalized) const;

  int32_t unk_id() const;
  float min_score() const;
  size_t size() const;

  struct Data;  // the piece trie and scores (unigram_model.cc)

 private:
  std::shared_ptr<const Data> data_;
};

}  // namespace gleaner::train::text
