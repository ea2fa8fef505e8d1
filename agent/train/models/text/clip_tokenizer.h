// The CLIP tokenizer of Stable Diffusion's `tokenizer/` and `tokenizer_2/` folders: byte-level BPE
// from `vocab.json` + `merges.txt`, giving exactly the ids of transformers' slow CLIPTokenizer
// without ftfy (as loaded by from_pretrained).
//
//   text --(special tokens split out: <|startoftext|>, <|endoftext|>, the pad token)--> pieces
//   piece --ClipPreTokenize (clip_pretokenizer.h)--> words --UTF-8 bytes as the byte-to-unicode
//   alphabet, "</w>" on the last symbol, merges by rank--> vocab ids
//   ids = [49406 (bos)] + ... + [49407 (eos)]
//
// Padding: `max_length` keeps bos + the first max_length-2 ids + eos and pads with the pad token's
// id: `<|endoftext|>` (49407; SD 1.x, SDXL's tokenizer) or `!` (0; SD 2.x, SDXL's tokenizer_2).
// The pad token is also split out of the text like the other special tokens (from_pretrained's
// sanitize_special_tokens), so with pad "!" every "!" in a prompt is its own id 0: "wow!!!" is
// [bos, wow</w>, 0, 0, 0, eos] there but [bos, wow</w>, !!!</w>, eos] with pad <|endoftext|>.
//
// merges.txt is read like transformers: the first line (the "#version" header, required here) is
// skipped and at most 48894 merges are used (49152 - 256 - 2); each line holds two symbols
// separated by ASCII whitespace; a repeated pair takes its later rank. A symbol missing from
// vocab.json becomes the unknown token (<|endoftext|>).
//
// Contract: loading fails with one readable Status naming the file and the problem; a loaded
// tokenizer is immutable, cheap to copy (shared data) and thread-safe. Encoding is O(n log n) in
// the text length and fails only for text that is not valid UTF-8. A default-constructed
// tokenizer is empty and refuses to encode.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "shared/status.h"

namespace gleaner::train::text {

class ClipTokenizer {
 public:
  static constexpr std::string_view kStartOfText = "<|startoftext|>";
  static constexpr std::string_view kEndOfText = "<|endoftext|>";
  static constexpr size_t kMaxMerges = 49152 - 256 - 2;

  ClipTokenizer() = default;

  // From the contents of vocab.json and merges.txt; `pad_token` must be in the vocabulary.
  static Result<ClipTokenizer> FromFiles(std::string_view vocab_json, std::string_view merges_txt,
                                         const std::string& pad_token = std::string(kEndOfText));
  // From a tokenizer folder (vocab.json, merges.txt). The pad token is `pad_override` when
  // non-empty, else special_tokens_map.json's `pad_token`, else tokenizer_config.json's, else
  // <|endoftext|> (transformers' precedence). bos/eos/unk tokens there must be CLIP's own.
  static Result<ClipTokenizer> Load(const std::string& dir, const std::string& pad_override = "");

  // [bos] + tokens + [eos], untruncated.
  Result<std::vector<int32_t>> Encode(std::string_view utf8) const;
  // Exactly max_length ids (>= 2): truncated to bos + first max_length-2 + eos, then padded.
  Result<std::vector<int32_t>> Encode(std::string_view utf8, size_t max_length) const;

  int32_t bos_id() const;
  int32_t eos_id() const;
  int32_t pad_id() const;
  const std::string& pad_token() const;
  size_t vocab_size() const;

  struct Data;  // vocabulary, merge table, special tokens (clip_tokenizer.cc)

 private:
  std::shared_ptr<const Data> data_;
};

}  // namespace gleaner::train::text
