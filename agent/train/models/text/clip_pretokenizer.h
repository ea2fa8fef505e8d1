// CLIP pre-tokenisation: text -> words for BPE, as transformers' slow CLIPTokenizer does it when
// ftfy is not installed (the case the references use):
//   BasicTokenizer(do_lower_case, strip_accents=False, do_split_on_punc=False): drop NUL, U+FFFD
//   and category C* except \t \n \r, whitespace -> ' ', spaces around CJK ideographs, NFC,
//   whitespace split, str.lower() per word (accents kept); then re.findall of
//   <\|startoftext\|>|<\|endoftext\|>|'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+
//   (IGNORECASE). No HTML unescaping.
//
// Contract: pure function of the code points, thread-safe; linear in the input length.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace gleaner::train::text {

// The regex matches of the cleaned, normalised, lowercased text, each as UTF-8.
std::vector<std::string> ClipPreTokenize(std::u32string_view text);

}  // namespace gleaner::train::text
