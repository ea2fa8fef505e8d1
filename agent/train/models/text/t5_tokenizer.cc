#include "agent/train/models/text/t5_tokenizer.h"

#include <limits>
#include <unordered_map>

#include "agent/train/models/text/sentencepiece_normalizer.h"
#include "agent/train/models/text/unigram_model.h"
#include "shared/json.h"
#include "shared/native/files.h"

namespace gleaner::train::text {

struct T5Tokenizer::Data {
  struct Added {
    std::string content;
    int32_t id = 0;
    bool strip_left = false, strip_right = false;  // whitespace eaten on that side
  };
  SentencePieceNormalizer normalizer;
  UnigramModel model;
  std::vector<std::string> pieces;  // id -> piece, vocabulary then added tokens beyond it
  std::vector<Added> added;
  bool added_first_byte[256] = {};
  int32_t eos = 1, pad = 0;

  // The text's ids before </s> is appended.
  std::vector<int64_t> TextIds(std::string_view text) const;
  // T5Tokenizer._add_eos_if_not_present.
  void AddEos(std::vector<int64_t>* ids) const {
    if (ids->empty() || ids->back() != eos) ids->push_back(eos);
  }
  void EncodeSegment(std::string_view segment, std::vector<int64_t>* ids) const;
};

namespace {

constexpr int64_t kMaxTokenizerJson = int64_t(256) << 20;

// Length of the valid UTF-8 character at s[0], 0 if none.
size_t CharLength(std::string_view s, char32_t* cp) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  auto trail = [&](size_t i) { return i < s.size() && (p[i] & 0xC0) == 0x80; };
  if (s.empty()) return 0;
  if (p[0] < 0x80) return *cp = p[0], 1;
  if ((p[0] & 0xE0) == 0xC0 && trail(1)) {
    *cp = char32_t(p[0] & 0x1F) << 6 | (p[1] & 0x3F);
    return *cp >= 0x80 ? 2 : 0;
  }
  if ((p[0] & 0xF0) == 0xE0 && trail(1) && trail(2)) {
    *cp = char32_t(p[0] & 0x0F) << 12 | char32_t(p[1] & 0x3F) << 6 | (p[2] & 0x3F);
    return *cp >= 0x800 && (*cp < 0xD800 || *cp > 0xDFFF) ? 3 : 0;
  }
  if ((p[0] & 0xF8) == 0xF0 && trail(1) && trail(2) && trail(3)) {
    *cp = char32_t(p[0] & 0x07) << 18 | char32_t(p[1] & 0x3F) << 12 | char32_t(p[2] & 0x3F) << 6 |
          (p[3] & 0x3F);
    return *cp >= 0x10000 && *cp <= 0x10FFFF ? 4 : 0;
  }
  return 0;
}

// Python's str.isspace().
bool IsPythonSpace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

std::string_view LStrip(std::string_view s) {
  char32_t c = 0;
  for (size_t n; (n = CharLength(s, &c)) > 0 && IsPythonSpace(c);) s.remove_prefix(n);
  return s;
}

std::string_view RStrip(std::string_view s) {
  for (;;) {
    size_t start = s.size();
    while (start > 0 && s.size() - start < 3 && (uint8_t(s[start - 1]) & 0xC0) == 0x80) --start;
    if (start == 0) return s;
    --start;
    char32_t c = 0;
    if (CharLength(s.substr(start), &c) != s.size() - start || !IsPythonSpace(c)) return s;
    s.remove_suffix(s.size() - start);
  }
}

const char* TypeOf(const Json& j) {
  auto t = j.find("type");
  return t != j.end() && t->is_string() ? t->get_ref<const std::string&>().c_str() : "";
}

// The normaliser: Precompiled, or a Sequence of Precompiled / Strip / Replace (what transformers'
// converter writes for SentencePiece models; the whitespace steps are built in). The char map's
// base64 goes to *chars_map ("" for none).
Status ReadNormalizer(const Json& j, std::string* chars_map) {
  if (j.is_null()) return Status::Ok();
  if (!j.is_object()) return Status::Invalid("normalizer is not an object");
  std::vector<const Json*> steps;
  if (std::string_view(TypeOf(j)) == "Sequence") {
    auto list = j.find("normalizers");
    if (list == j.end() || !list->is_array()) {
      return Status::Invalid("normalizer.normalizers is not an array");
    }
    for (const Json& s : *list) steps.push_back(&s);
  } else {
    steps.push_back(&j);
  }
  bool seen = false;
  for (const Json* s : steps) {
    if (!s->is_object()) return Status::Invalid("a normalizer is not an object");
    const std::string_view type = TypeOf(*s);
    if (type == "Strip" || type == "Replace") continue;
    if (type != "Precompiled") {
      return Status::Invalid("normalizer \"" + std::string(type).substr(0, 64) +
                             "\" is not supported (a T5 tokenizer has Precompiled)");
    }
    if (seen) return Status::Invalid("more than one Precompiled normalizer");
    seen = true;
    auto map = s->find("precompiled_charsmap");
    if (map == s->end() || map->is_null()) continue;
    if (!map->is_string()) return Status::Invalid("precompiled_charsmap is not a string");
    *chars_map = map->get_ref<const std::string&>();
  }
  return Status::Ok();
}

// The Metaspace pre-tokenizer (alone or after WhitespaceSplit): whether texts get a leading "▁".
Status ReadPreTokenizer(const Json& j, bool* add_prefix) {
  if (!j.is_object()) return Status::Invalid("pre_tokenizer is missing (T5 uses Metaspace)");
  std::vector<const Json*> steps;
  if (std::string_view(TypeOf(j)) == "Sequence") {
    auto list = j.find("pretokenizers");
    if (list == j.end() || !list->is_array()) {
      return Status::Invalid("pre_tokenizer.pretokenizers is not an array");
    }
    for (const Json& s : *list) steps.push_back(&s);
  } else {
    steps.push_back(&j);
  }
  int metaspace = 0;
  for (const Json* s : steps) {
    const std::string_view type = s->is_object() ? TypeOf(*s) : "";
    if (type == "WhitespaceSplit") continue;
    if (type != "Metaspace") {
      return Status::Invalid("pre_tokenizer \"" + std::string(type).substr(0, 64) +
                             "\" is not supported (T5 uses Metaspace)");
    }
    ++metaspace;
    auto rep = s->find("replacement");
    if (rep == s->end() || !rep->is_string() ||
        rep->get_ref<const std::string&>() != SentencePieceNormalizer::kSpaceSymbol) {
      return Status::Invalid("the Metaspace replacement is not \"\xe2\x96\x81\"");
    }
    auto scheme = s->find("prepend_scheme");
    auto legacy = s->find("add_prefix_space");
    *add_prefix = !((scheme != s->end() && scheme->is_string() &&
                     scheme->get_ref<const std::string&>() == "never") ||
                    (legacy != s->end() && legacy->is_boolean() && !legacy->get<bool>()));
  }
  if (metaspace != 1) return Status::Invalid("pre_tokenizer has no single Metaspace");
  return Status::Ok();
}

Status ReadModel(const Json& model, std::vector<UnigramModel::Piece>* pieces, int64_t* unk) {
  if (!model.is_object()) return Status::Invalid("has no model");
  const std::string_view type = TypeOf(model);
  if (type != "Unigram") {
    return Status::Invalid("model type \"" + std::string(type).substr(0, 64) +
                           "\" is not supported (a T5 tokenizer is Unigram)");
  }
  auto fallback = model.find("byte_fallback");
  if (fallback != model.end() && fallback->is_boolean() && fallback->get<bool>()) {
    return Status::Invalid("model.byte_fallback true is not supported");
  }
  auto vocab = model.find("vocab");
  if (vocab == model.end() || !vocab->is_array() || vocab->empty()) {
    return Status::Invalid("model.vocab is not a non-empty array of [piece, score] pairs");
  }
  if (vocab->size() > size_t(std::numeric_limits<int32_t>::max())) {
    return Status::Invalid("model.vocab is too large");
  }
  pieces->reserve(vocab->size());
  for (size_t i = 0; i < vocab->size(); ++i) {
    const Json& e = (*vocab)[i];
    if (!e.is_array() || e.size() != 2 || !e[0].is_string() || !e[1].is_number()) {
      return Status::Invalid("model.vocab[" + std::to_string(i) + "] is not a [piece, score] pair");
    }
    pieces->push_back({e[0].get<std::string>(), float(e[1].get<double>()), true});
  }
  auto u = model.find("unk_id");
  if (u == model.end() || !u->is_number_integer() || u->get<int64_t>() < 0 ||
      u->get<int64_t>() >= int64_t(pieces->size())) {
    return Status::Invalid("model.unk_id is not an id of model.vocab");
  }
  *unk = u->get<int64_t>();
  return Status::Ok();
}

Status ReadAddedTokens(const Json& j, std::vector<UnigramModel::Piece>* vocab,
                       T5Tokenizer::Data* d) {
  d->pieces.reserve(vocab->size());
  for (const auto& p : *vocab) d->pieces.push_back(p.text);
  if (j.is_null()) return Status::Ok();
  if (!j.is_array()) return Status::Invalid("added_tokens is not an array");
  for (size_t i = 0; i < j.size(); ++i) {
    const Json& t = j[i];
    const std::string where = "added_tokens[" + std::to_string(i) + "]";
    FieldReader r(t, where + ".");
    int64_t id = 0;
    std::string content;
    bool special = false, lstrip = false, rstrip = false;
    r.Int("id", &id, true, 0, std::numeric_limits<int32_t>::max() - 1);
    r.String("content", &content, true, 256);
    r.Bool("special", &special, false);
    r.Bool("lstrip", &lstrip, false);
    r.Bool("rstrip", &rstrip, false);
    if (!r.ok()) return r.status();
    if (content.empty()) return Status::Invalid(where + ".content is empty");
    if (size_t(id) < vocab->size()) {
      if ((*vocab)[size_t(id)].text != content) {
        return Status::Invalid(where + " (\"" + content + "\") is not model.vocab[" +
                               std::to_string(id) + "]");
      }
      if (special) (*vocab)[size_t(id)].matchable = false;  // SentencePiece's control tokens
    } else {
      if (size_t(id) >= vocab->size() + j.size()) {  // added tokens follow the vocabulary
        return Status::Invalid(where + ".id " + std::to_string(id) +
                               " is beyond the vocabulary and the added tokens");
      }
      if (d->pieces.size() <= size_t(id)) d->pieces.resize(size_t(id) + 1);
      d->pieces[size_t(id)] = content;
    }
    // T5Tokenizer makes <extra_id_N> AddedToken(lstrip=True, rstrip=True) whatever the file says.
    const bool extra = content.rfind("<extra_id_", 0) == 0;
    d->added.push_back({content, int32_t(id), lstrip || extra, rstrip || extra});
    d->added_first_byte[uint8_t(content[0])] = true;
  }
  return Status::Ok();
}

int32_t FindPiece(const std::vector<std::string>& pieces, std::string_view piece) {
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (pieces[i] == piece) return int32_t(i);
  }
  return -1;
}

}  // namespace

Result<T5Tokenizer> T5Tokenizer::FromJson(std::string_view tokenizer_json,
                                          const std::string& name) {
  auto fail = [&](const Status& s) { return Status::Invalid(name + ": " + s.message()); };
  Result<Json> j = ParseJson(tokenizer_json, 64);
  if (!j.ok()) {
    const std::string& m = j.status().message();
    return fail(Status::Invalid(m.rfind("body ", 0) == 0 ? m.substr(5) : m));
  }
  if (!j->is_object()) return fail(Status::Invalid("not a JSON object"));
  auto field = [&](const char* key) -> const Json& {
    static const Json kNull;
    auto it = j->find(key);
    return it == j->end() ? kNull : *it;
  };
  auto d = std::make_shared<Data>();
  std::vector<UnigramModel::Piece> vocab;
  int64_t unk = 0;
  Status s = ReadModel(field("model"), &vocab, &unk);
  if (s.ok()) s = ReadAddedTokens(field("added_tokens"), &vocab, d.get());
  std::string chars_map;
  if (s.ok()) s = ReadNormalizer(field("normalizer"), &chars_map);
  bool add_prefix = true;
  if (s.ok()) s = ReadPreTokenizer(field("pre_tokenizer"), &add_prefix);
  if (!s.ok()) return fail(s);
  Result<SentencePieceNormalizer> norm =
      SentencePieceNormalizer::FromBase64CharsMap(chars_map, add_prefix);
  if (!norm.ok()) return fail(norm.status());
  d->normalizer = std::move(*norm);
  Result<UnigramModel> model = UnigramModel::Build(vocab, int32_t(unk));
  if (!model.ok()) return fail(Status::Invalid("model.vocab: " + model.status().message()));
  d->model = std::move(*model);
  d->eos = FindPiece(d->pieces, "</s>");
  d->pad = FindPiece(d->pieces, "<pad>");
  if (d->eos < 0) return fail(Status::Invalid("has no </s> piece"));
  if (d->pad < 0) return fail(Status::Invalid("has no <pad> piece"));
  T5Tokenizer t;
  t.data_ = std::move(d);
  return t;
}

Result<T5Tokenizer> T5Tokenizer::Load(const std::string& dir_or_tokenizer_json) {
  const std::string path = files::IsDir(dir_or_tokenizer_json)
                               ? files::Join(dir_or_tokenizer_json, "tokenizer.json")
                               : dir_or_tokenizer_json;
  Result<std::string> text = files::ReadAll(path, kMaxTokenizerJson);
  if (!text.ok()) {
    if (text.status().code() == Code::kNotFound) {
      return Status::NotFound(path +
                              " does not exist (a T5 tokenizer is read from tokenizer.json)");
    }
    return text.status();
  }
  return FromJson(*text, path);
}

std::vector<int64_t> T5Tokenizer::Data::TextIds(std::string_view text) const {
  std::vector<int64_t> ids;
  size_t segment = 0;       // start of the text not yet encoded
  bool strip_next = false;  // the previous added token eats the whitespace after it
  for (size_t i = 0; i < text.size();) {
    const Added* best = nullptr;
    if (added_first_byte[uint8_t(text[i])]) {
      for (const Added& a : added) {
        if ((!best || a.content.size() > best->content.size()) &&
            text.compare(i, a.content.size(), a.content) == 0) {
          best = &a;
        }
      }
    }
    if (!best) {
      ++i;
      continue;
    }
    std::string_view before = text.substr(segment, i - segment);
    if (strip_next) before = LStrip(before);
    if (best->strip_left) before = RStrip(before);
    EncodeSegment(before, &ids);
    ids.push_back(best->id);
    strip_next = best->strip_right;
    i += best->content.size();
    segment = i;
  }
  std::string_view rest = text.substr(segment);
  if (strip_next) rest = LStrip(rest);
  EncodeSegment(rest, &ids);
  return ids;
}

void T5Tokenizer::Data::EncodeSegment(std::string_view segment, std::vector<int64_t>* ids) const {
  if (segment.empty()) return;
  const std::string normalized = normalizer.Normalize(segment);
  for (const UnigramModel::Token& t : model.Encode(normalized)) ids->push_back(t.id);
}

std::vector<int64_t> T5Tokenizer::Encode(std::string_view text, size_t max_length) const {
  if (!data_) return std::vector<int64_t>(max_length, 0);
  std::vector<int64_t> ids = data_->TextIds(text);
  // transformers keeps max_length-1 of the text's ids (room for </s>), then appends </s> unless
  // they end with it already, then pads.
  if (max_length > 0 && ids.size() + 1 > max_length) ids.resize(max_length - 1);
  data_->AddEos(&ids);
  if (max_length > 0) ids.resize(max_length, data_->pad);
  return ids;
}

std::vector<std::string> T5Tokenizer::Pieces(std::string_view text) const {
  std::vector<std::string> out;
  for (int64_t id : Encode(text)) out.push_back(IdToPiece(id));
  return out;
}

size_t T5Tokenizer::UntruncatedLength(std::string_view text) const {
  return Encode(text).size();
}

std::string T5Tokenizer::Normalize(std::string_view text) const {
  return data_ ? data_->normalizer.Normalize(text) : std::string(text);
}

const std::string& T5Tokenizer::IdToPiece(int64_t id) const {
  static const std::string kNone;
  if (!data_ || id < 0 || size_t(id) >= data_->pieces.size()) return kNone;
  return data_->pieces[size_t(id)];
}
int64_t T5Tokenizer::pad_id() const {
  return data_ ? data_->pad : 0;
}
int64_t T5Tokenizer::eos_id() const {
  return data_ ? data_->eos : 1;
}
int64_t T5Tokenizer::unk_id() const {
  return data_ ? data_->model.unk_id() : 2;
}
size_t T5Tokenizer::vocab_size() const {
  return data_ ? data_->pieces.size() : 0;
}

}  // namespace gleaner::train::text
