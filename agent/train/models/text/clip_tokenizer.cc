#include "agent/train/models/text/clip_tokenizer.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <queue>
#include <unordered_map>

#include "agent/train/models/text/clip_pretokenizer.h"
#include "agent/train/models/text/unicode_text.h"
#include "shared/json.h"
#include "shared/native/files.h"

namespace gleaner::train::text {

struct ClipTokenizer::Data {
  struct Merge {
    int32_t rank;
    int32_t merged;  // symbol id of left + right
  };
  std::unordered_map<std::string, int32_t> vocab;
  // Every symbol BPE can see (the 256 byte characters, each also with "</w>", and every merge's
  // parts and result), interned to small ids; symbol_vocab maps them to vocab ids.
  std::unordered_map<std::string, int32_t> symbol_ids;
  std::vector<int32_t> symbol_vocab;
  std::unordered_map<uint64_t, Merge> merges;  // key: left << 32 | right
  int32_t byte_symbol[256] = {}, byte_symbol_end[256] = {};
  std::string specials[3];  // split out of the text before pre-tokenisation
  int32_t special_ids[3] = {};
  int32_t bos = 0, eos = 0, pad = 0;
  std::string pad_token;

  int32_t Intern(const std::string& s) {
    return symbol_ids.emplace(s, int32_t(symbol_ids.size())).first->second;
  }
  void EncodePiece(std::string_view utf8, std::vector<int32_t>* ids) const;
  void Bpe(const std::string& word, std::vector<int32_t>* ids) const;
};

namespace {

constexpr std::string_view kEndOfWord = "</w>";

// GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves, the other 68 bytes for
// U+0100.. in byte order.
char32_t ByteChar(uint8_t b) {
  if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE) return b;
  int n = 0;
  for (int x = 0; x < b; ++x) {
    if (!((x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || x >= 0xAE)) ++n;
  }
  return char32_t(0x100 + n);
}

uint64_t PairKey(int32_t left, int32_t right) {
  return (uint64_t(uint32_t(left)) << 32) | uint32_t(right);
}

bool IsAsciiSpace(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

Status LoadVocab(std::string_view text, ClipTokenizer::Data* d) {
  Result<Json> j = ParseJson(text);
  if (!j.ok()) return Status::Invalid("vocab.json: " + j.status().message());
  if (!j->is_object() || j->empty()) {
    return Status::Invalid("vocab.json: expected a JSON object of token ids");
  }
  for (auto it = j->begin(); it != j->end(); ++it) {
    const Json& v = it.value();
    if (!v.is_number_integer() || v.get<int64_t>() < 0 ||
        v.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
      return Status::Invalid("vocab.json: the id of \"" + it.key().substr(0, 64) +
                             "\" is not an integer in [0, 2^31)");
    }
    d->vocab[it.key()] = int32_t(v.get<int64_t>());
  }
  for (std::string_view t : {ClipTokenizer::kStartOfText, ClipTokenizer::kEndOfText}) {
    if (!d->vocab.count(std::string(t))) {
      return Status::Invalid("vocab.json: has no " + std::string(t));
    }
  }
  return Status::Ok();
}

Status LoadMerges(std::string_view text, ClipTokenizer::Data* d) {
  Result<std::u32string> valid = DecodeUtf8(text);
  if (!valid.ok()) return Status::Invalid("merges.txt: " + valid.status().message());
  // transformers: read().strip().split("\n")[1 : 1 + kMaxMerges]
  auto space = [](char c) { return IsAsciiSpace(c) || c == '\n'; };
  while (!text.empty() && space(text.front())) text.remove_prefix(1);
  while (!text.empty() && space(text.back())) text.remove_suffix(1);
  if (text.rfind("#version", 0) != 0) {
    return Status::Invalid("merges.txt: the first line is not a \"#version\" header");
  }
  size_t line_no = 1, pos = text.find('\n');
  while (pos != std::string_view::npos && line_no <= ClipTokenizer::kMaxMerges) {
    size_t end = text.find('\n', pos + 1);
    std::string_view line =
        text.substr(pos + 1, end == std::string_view::npos ? end : end - pos - 1);
    std::vector<std::string> parts;
    for (size_t i = 0; i < line.size();) {
      if (IsAsciiSpace(line[i])) {
        ++i;
        continue;
      }
      size_t j = i;
      while (j < line.size() && !IsAsciiSpace(line[j])) ++j;
      parts.emplace_back(line.substr(i, j - i));
      i = j;
    }
    ++line_no;
    if (parts.size() != 2) {
      return Status::Invalid("merges.txt: line " + std::to_string(line_no) +
                             " does not hold two symbols");
    }
    int32_t left = d->Intern(parts[0]), right = d->Intern(parts[1]);
    int32_t merged = d->Intern(parts[0] + parts[1]);
    d->merges.insert_or_assign(PairKey(left, right),
                               ClipTokenizer::Data::Merge{int32_t(line_no - 2), merged});
    pos = end;
  }
  return Status::Ok();
}

// Reads one of a tokenizer folder's optional JSON files: a special token given as a string or as
// {"content": ...}.
Status ReadSpecialTokens(const std::string& path, std::string* pad) {
  if (!files::Exists(path)) return Status::Ok();
  Result<std::string> text = files::ReadAll(path, 1 << 20);
  if (!text.ok()) return text.status();
  Result<Json> j = ParseJson(*text);
  if (!j.ok()) return Status::Invalid(path + ": " + j.status().message());
  if (!j->is_object()) return Status::Invalid(path + ": not a JSON object");
  for (const char* key : {"bos_token", "eos_token", "unk_token", "pad_token"}) {
    auto it = j->find(key);
    if (it == j->end() || it->is_null()) continue;
    const Json* v = &*it;
    if (v->is_object() && v->find("content") != v->end()) v = &*v->find("content");
    if (!v->is_string()) return Status::Invalid(path + ": " + key + " is not a string");
    const std::string& s = v->get_ref<const std::string&>();
    std::string_view want = std::strcmp(key, "bos_token") == 0 ? ClipTokenizer::kStartOfText
                                                               : ClipTokenizer::kEndOfText;
    if (std::strcmp(key, "pad_token") == 0) {
      *pad = s;
    } else if (s != want) {
      return Status::Invalid(path + ": " + key + " \"" + s + "\" is not supported (CLIP uses " +
                             std::string(want) + ")");
    }
  }
  return Status::Ok();
}

}  // namespace

Result<ClipTokenizer> ClipTokenizer::FromFiles(std::string_view vocab_json,
                                               std::string_view merges_txt,
                                               const std::string& pad_token) {
  auto d = std::make_shared<Data>();
  GLEANER_RETURN_IF_ERROR(LoadVocab(vocab_json, d.get()));
  for (int b = 0; b < 256; ++b) {
    std::string c = EncodeUtf8(std::u32string(1, ByteChar(uint8_t(b))));
    d->byte_symbol[b] = d->Intern(c);
    d->byte_symbol_end[b] = d->Intern(c + std::string(kEndOfWord));
  }
  GLEANER_RETURN_IF_ERROR(LoadMerges(merges_txt, d.get()));
  d->bos = d->vocab.at(std::string(kStartOfText));
  d->eos = d->vocab.at(std::string(kEndOfText));
  auto pad = d->vocab.find(pad_token);
  if (pad == d->vocab.end()) {
    return Status::Invalid("pad token \"" + pad_token + "\" is not in vocab.json");
  }
  d->pad = pad->second;
  d->pad_token = pad_token;
  d->specials[0] = std::string(kStartOfText);
  d->specials[1] = std::string(kEndOfText);
  d->specials[2] = pad_token;
  d->special_ids[0] = d->bos;
  d->special_ids[1] = d->eos;
  d->special_ids[2] = d->pad;
  d->symbol_vocab.assign(d->symbol_ids.size(), d->eos);  // unknown -> <|endoftext|>
  for (const auto& [s, id] : d->symbol_ids) {
    auto v = d->vocab.find(s);
    if (v != d->vocab.end()) d->symbol_vocab[size_t(id)] = v->second;
  }
  ClipTokenizer t;
  t.data_ = std::move(d);
  return t;
}

Result<ClipTokenizer> ClipTokenizer::Load(const std::string& dir, const std::string& pad_override) {
  std::string pad(kEndOfText);
  GLEANER_RETURN_IF_ERROR(ReadSpecialTokens(files::Join(dir, "tokenizer_config.json"), &pad));
  GLEANER_RETURN_IF_ERROR(ReadSpecialTokens(files::Join(dir, "special_tokens_map.json"), &pad));
  if (!pad_override.empty()) pad = pad_override;
  Result<std::string> vocab = files::ReadAll(files::Join(dir, "vocab.json"), 64 << 20);
  if (!vocab.ok()) return vocab.status();
  Result<std::string> merges = files::ReadAll(files::Join(dir, "merges.txt"), 64 << 20);
  if (!merges.ok()) return merges.status();
  Result<ClipTokenizer> t = FromFiles(*vocab, *merges, pad);
  if (!t.ok()) return Status(t.status().code(), dir + ": " + t.status().message());
  return t;
}

Result<std::vector<int32_t>> ClipTokenizer::Encode(std::string_view utf8) const {
  if (!data_) return Status::Invalid("tokenizer not loaded");
  Result<std::u32string> valid = DecodeUtf8(utf8);
  if (!valid.ok()) return Status::Invalid("prompt: " + valid.status().message());
  std::vector<int32_t> ids{data_->bos};
  // The added-token split: leftmost, then longest, special token.
  size_t piece = 0;
  for (size_t i = 0; i < utf8.size();) {
    size_t best = 0;
    for (size_t s = 0; s < 3; ++s) {
      const std::string& sp = data_->specials[s];
      if (sp.size() > best && utf8.compare(i, sp.size(), sp) == 0) best = sp.size();
    }
    if (best == 0) {
      ++i;
      continue;
    }
    data_->EncodePiece(utf8.substr(piece, i - piece), &ids);
    for (size_t s = 0; s < 3; ++s) {
      if (data_->specials[s].size() == best && utf8.compare(i, best, data_->specials[s]) == 0) {
        ids.push_back(data_->special_ids[s]);
        break;
      }
    }
    i += best;
    piece = i;
  }
  data_->EncodePiece(utf8.substr(piece), &ids);
  ids.push_back(data_->eos);
  return ids;
}

Result<std::vector<int32_t>> ClipTokenizer::Encode(std::string_view utf8, size_t max_length) const {
  if (max_length < 2) return Status::Invalid("max_length must be at least 2");
  Result<std::vector<int32_t>> ids = Encode(utf8);
  if (!ids.ok()) return ids;
  if (ids->size() > max_length) {
    ids->resize(max_length - 1);
    ids->push_back(data_->eos);
  }
  ids->resize(max_length, data_->pad);
  return ids;
}

void ClipTokenizer::Data::EncodePiece(std::string_view utf8, std::vector<int32_t>* ids) const {
  if (utf8.empty()) return;
  Result<std::u32string> text = DecodeUtf8(utf8);  // valid: checked whole, split at tokens
  for (const std::string& word : ClipPreTokenize(*text)) {
    // transformers' bpe() cache starts with the two special tokens, returned whole.
    if (word == kStartOfText) {
      ids->push_back(bos);
    } else if (word == kEndOfText) {
      ids->push_back(eos);
    } else {
      Bpe(word, ids);
    }
  }
}

// GPT-2 BPE: repeatedly take the lowest-ranked adjacent pair and merge all its occurrences left to
// right. A heap of candidate pairs (stale entries skipped) makes it O(n log n); each rank's
// occurrences are merged as one batch in position order, which is exactly the reference's pass.
void ClipTokenizer::Data::Bpe(const std::string& word, std::vector<int32_t>* ids) const {
  const int n = int(word.size());
  if (n == 0) return;
  const size_t count = word.size();
  std::vector<int32_t> sym(count), prev(count), next(count);
  for (int i = 0; i < n; ++i) {
    uint8_t b = uint8_t(word[size_t(i)]);
    sym[size_t(i)] = i + 1 < n ? byte_symbol[b] : byte_symbol_end[b];
    prev[size_t(i)] = i - 1;
    next[size_t(i)] = i + 1 < n ? i + 1 : -1;
  }
  struct Candidate {
    int32_t rank, pos, left, right, merged;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
  auto push = [&](int pos) {
    if (pos < 0 || next[size_t(pos)] < 0) return;
    int32_t l = sym[size_t(pos)], r = sym[size_t(next[size_t(pos)])];
    auto m = merges.find(PairKey(l, r));
    if (m != merges.end()) heap.push({m->second.rank, pos, l, r, m->second.merged});
  };
  for (int i = 0; i + 1 < n; ++i) push(i);
  std::vector<Candidate> batch;
  while (!heap.empty()) {
    batch.clear();
    int32_t rank = heap.top().rank;
    while (!heap.empty() && heap.top().rank == rank) {  // popped in position order
      batch.push_back(heap.top());
      heap.pop();
    }
    for (const Candidate& c : batch) {
      size_t p = size_t(c.pos);
      int nx = next[p];
      if (sym[p] != c.left || nx < 0 || sym[size_t(nx)] != c.right || prev[p] == -2) continue;
      sym[p] = c.merged;
      prev[size_t(nx)] = -2;  // removed
      next[p] = next[size_t(nx)];
      if (next[p] >= 0) prev[size_t(next[p])] = int32_t(p);
      push(prev[p]);
      push(int(p));
    }
  }
  for (int i = 0; i >= 0; i = next[size_t(i)]) ids->push_back(symbol_vocab[size_t(sym[size_t(i)])]);
}

int32_t ClipTokenizer::bos_id() const {
  return data_ ? data_->bos : 0;
}
int32_t ClipTokenizer::eos_id() const {
  return data_ ? data_->eos : 0;
}
int32_t ClipTokenizer::pad_id() const {
  return data_ ? data_->pad : 0;
}
const std::string& ClipTokenizer::pad_token() const {
  static const std::string kNone;
  return data_ ? data_->pad_token : kNone;
}
size_t ClipTokenizer::vocab_size() const {
  return data_ ? data_->vocab.size() : 0;
}

}  // namespace gleaner::train::text
