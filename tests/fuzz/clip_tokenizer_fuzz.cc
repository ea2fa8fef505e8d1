// libFuzzer target for the CLIP tokenizer: arbitrary bytes as a prompt (invalid UTF-8 included)
// and as vocab.json / merges.txt. Input: the whole input is a prompt for a fixed small tokenizer;
// when it holds two NUL bytes, "VOCAB\0MERGES\0PROMPT" is also loaded and used. Nothing may crash
// or hang; an encoding fails exactly when the prompt is not UTF-8, and padded output has the
// requested length, starts with bos and holds eos.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "agent/train/models/text/clip_tokenizer.h"
#include "agent/train/models/text/unicode_text.h"

namespace {

using gleaner::train::text::ClipTokenizer;

const ClipTokenizer& Fixed() {
  static const ClipTokenizer t = [] {
    auto r = ClipTokenizer::FromFiles(
        R"({"a": 0, "b": 1, "a</w>": 2, "b</w>": 3, "aa": 4, "ab</w>": 5, "!": 6,
            "<|startoftext|>": 7, "<|endoftext|>": 8, "\u00e9</w>": 9})",
        "#version: 0.2\na a\na b</w>\n\u00c3 \u00a9</w>\n", "!");
    if (!r.ok()) abort();
    return *r;
  }();
  return t;
}

void Check(const ClipTokenizer& t, std::string_view prompt) {
  bool valid = gleaner::train::text::DecodeUtf8(prompt).ok();
  auto ids = t.Encode(prompt);
  if (ids.ok() != valid) abort();
  if (!valid) return;
  if (ids->size() < 2 || ids->front() != t.bos_id() || ids->back() != t.eos_id()) abort();
  auto padded = t.Encode(prompt, 8);
  if (!padded.ok() || padded->size() != 8 || padded->front() != t.bos_id()) abort();
  if (std::find(padded->begin(), padded->end(), t.eos_id()) == padded->end()) abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  Check(Fixed(), in);
  size_t a = in.find('\0');
  size_t b = a == std::string_view::npos ? a : in.find('\0', a + 1);
  if (b != std::string_view::npos) {
    auto t = ClipTokenizer::FromFiles(in.substr(0, a), in.substr(a + 1, b - a - 1));
    if (t.ok()) Check(*t, in.substr(b + 1));
  }
  return 0;
}
