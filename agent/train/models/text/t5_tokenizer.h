// The T5 tokenizer of FLUX.1's `tokenizer_2/` (and other T5 v1.1 text encoders), read from the
// folder's `tokenizer.json` alone, giving exactly the ids of transformers' slow T5Tokenizer
// (SentencePiece backend, legacy=True, as FLUX.1's tokenizer_config.json sets it):
//
//   text --added tokens split out (<pad>, </s>, <unk>, <extra_id_N>: leftmost, then longest;
//          Python whitespace next to an <extra_id_N> is dropped, as T5Tokenizer's lstrip/rstrip)
//        --each other segment: SentencePiece normalisation (sentencepiece_normalizer.h: the
//          `Precompiled` char map, blanks collapsed, "▁" for spaces, a leading "▁")
//        --Unigram Viterbi over the piece scores (unigram_model.h; runs of unknowns are one
//          <unk>)--> ids, then </s> appended unless the ids already end with it.
//
// tokenizer.json must hold a `Unigram` model (`vocab` as [piece, score] pairs, `unk_id`, no
// byte fallback), a normaliser that is `Precompiled` or a Sequence of Precompiled / Strip /
// Replace (the whitespace rules above are what those do), a `Metaspace` pre-tokenizer (alone or
// after WhitespaceSplit) with replacement "▁", and the pieces "</s>" and "<pad>". The fast
// tokenizer's pipeline (WhitespaceSplit + Metaspace per word) and the slow one segment alike;
// where they differ (text right after an added token, leading blanks), the slow one is followed.
//
// Padding and truncation as FluxPipeline asks for them (padding="max_length", truncation=True):
// Encode(text, L) keeps the first L-1 ids, appends </s>, and pads with <pad> to exactly L ids.
//
// Contract: loading fails with one readable Status naming the file and the problem (missing
// file, malformed JSON, another model type, a bad field); a loaded tokenizer is immutable, cheap
// to copy (shared data) and thread-safe. Encoding accepts any bytes and never fails (a byte that
// is not UTF-8 is read as U+FFFD, as SentencePiece does). A default-constructed tokenizer is
// empty: Encode gives max_length zeros (no ids when max_length is 0).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "shared/status.h"

namespace gleaner::train::text {

class T5Tokenizer {
 public:
  T5Tokenizer() = default;

  // From a tokenizer folder (its tokenizer.json) or the path of a tokenizer.json itself.
  static Result<T5Tokenizer> Load(const std::string& dir_or_tokenizer_json);
  // From the contents of a tokenizer.json; `name` heads every error message.
  static Result<T5Tokenizer> FromJson(std::string_view tokenizer_json,
                                      const std::string& name = "tokenizer.json");

  // All ids of the text with </s>, untruncated (max_length 0), or exactly max_length ids: the
  // first max_length-1 ids, </s>, then <pad> ids.
  std::vector<int64_t> Encode(std::string_view text, size_t max_length = 0) const;
  // The untruncated ids as vocabulary pieces ("▁photo", "<unk>", "</s>").
  std::vector<std::string> Pieces(std::string_view text) const;
  // Encode(text).size(): more than max_length means Encode(text, max_length) truncated it.
  size_t UntruncatedLength(std::string_view text) const;
  // The SentencePiece-normalised form of one text segment (no added tokens split out).
  std::string Normalize(std::string_view text) const;

  // The piece of an id ("" for an id outside the vocabulary).
  const std::string& IdToPiece(int64_t id) const;
  int64_t pad_id() const;
  int64_t eos_id() const;
  int64_t unk_id() const;
  size_t vocab_size() const;

  struct Data;  // normaliser, Unigram model, added tokens (t5_tokenizer.cc)

 private:
  std::shared_ptr<const Data> data_;
};

}  // namespace gleaner::train::text
