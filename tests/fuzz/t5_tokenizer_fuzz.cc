// libFuzzer target for the T5 tokenizer (tokenizer.json: SentencePiece char map, Unigram, added
// tokens). Input: the whole input is a prompt (any bytes) for a fixed small tokenizer with a char
// map; it is also read as a char-map blob, which must load or be refused and then normalise
// anything without reading out of bounds; when it holds a NUL byte, "TOKENIZER_JSON\0PROMPT" is
// loaded and used. Nothing may crash or hang; every encoding ends with </s>, has ids inside the
// vocabulary and one piece per id, and padded output has exactly the requested length.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "agent/train/models/text/sentencepiece_normalizer.h"
#include "agent/train/models/text/t5_tokenizer.h"

namespace {

using gleaner::train::text::SentencePieceNormalizer;
using gleaner::train::text::T5Tokenizer;

// Rules: U+FB01 -> "fi", tab / LF / U+3000 / NBSP -> " ", U+FF21 -> "A", U+2460 -> "1",
// U+0001 -> "", "A" + U+0308 -> U+00C4.
constexpr const char* kCharsMap =
    "uAMAAAAIAAAAAACAAAAAAAEJAAABAACAAwAAgAAAAAAFAACACjUAAAgAAIAAAAAACT0AAAoAAIAAAAAADAAAgAAAAAAAAA"
    "AAAAAAAA4AAIAAAAAAEQAAgAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
    "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
    "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAABBAAEAAAAAAAAA"
    "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
    "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
    "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
    "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
    "AAAAAIAIAgCIJQIAgAUCAIEJAgAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAkUACAAAAAAAAAA"
    "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAKCFAgAAAAAAAAAAAKCdAgC8/"
    "AIAAAAAAAAAAAAAAAAAAAAAAAAAAAChmQIAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAArLQCAAAAAAA"
    "AAAAAAAAAAMIgAwAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAMwkA"
    "wAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA4qgDAOO"
    "wAwAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAO/0AwAAIAAgAMOEACAAMQAgAGZpAEEA";

const T5Tokenizer& Fixed() {
  static const T5Tokenizer t = [] {
    std::string json = R"({"model": {"type": "Unigram", "unk_id": 2, "vocab": [
        ["<pad>", 0.0], ["</s>", 0.0], ["<unk>", 0.0], ["\u2581", -2.0], ["a", -3.0],
        ["b", -3.0], ["ab", -4.0], ["\u2581ab", -5.5], ["f", -3.0], ["i", -3.0], ["fi", -2.5],
        ["\u00c4", -4.0], ["A", -4.5], ["1", -3.5], ["<extra_id_0>", 0.0]]},
      "added_tokens": [{"id": 0, "content": "<pad>", "special": true},
        {"id": 1, "content": "</s>", "special": true},
        {"id": 2, "content": "<unk>", "special": true},
        {"id": 14, "content": "<extra_id_0>", "special": true}],
      "normalizer": {"type": "Sequence", "normalizers": [
        {"type": "Precompiled", "precompiled_charsmap": ")";
    json += kCharsMap;
    json += R"("}]},
      "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581",
                        "prepend_scheme": "always"}})";
    auto r = T5Tokenizer::FromJson(json);
    if (!r.ok()) abort();
    return *r;
  }();
  return t;
}

void Check(const T5Tokenizer& t, std::string_view prompt) {
  const std::vector<int64_t> ids = t.Encode(prompt);
  if (ids.empty() || ids.back() != t.eos_id()) abort();
  for (int64_t id : ids) {
    if (id < 0 || size_t(id) >= t.vocab_size()) abort();
  }
  if (t.UntruncatedLength(prompt) != ids.size() || t.Pieces(prompt).size() != ids.size()) abort();
  const std::vector<int64_t> padded = t.Encode(prompt, 8);
  if (padded.size() != 8) abort();
  if (std::find(padded.begin(), padded.end(), t.eos_id()) == padded.end()) abort();
  if (ids.size() <= 8 && !std::equal(ids.begin(), ids.end(), padded.begin())) abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  Check(Fixed(), in);
  auto n = SentencePieceNormalizer::FromCharsMap(in);
  if (n.ok()) {
    n->Normalize(in);
    n->Normalize("A\xcc\x88 \xef\xac\x81\t1");
  }
  size_t nul = in.find('\0');
  if (nul != std::string_view::npos) {
    auto t = T5Tokenizer::FromJson(in.substr(0, nul));
    if (t.ok()) Check(*t, in.substr(nul + 1));
  }
  return 0;
}
