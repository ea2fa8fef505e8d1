// T5 tokenizer: every reference id and piece exactly (API and `gleaner-train tokenize`), the
// SentencePiece normaliser over a char map built here, Unigram Viterbi details and added tokens on
// a tiny vocabulary, and one clear error per bad tokenizer.json.
#include "agent/train/models/text/t5_tokenizer.h"

#include <sys/stat.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <functional>
#include <map>

#include "agent/protocol/trainer_protocol.h"
#include "agent/train/models/text/sentencepiece_normalizer.h"
#include "shared/json.h"
#include "shared/safetensors.h"
#include "tests/skip.h"
#include "text_test_util.h"

using namespace gleaner;
using namespace gleaner::train::text;
using namespace gleaner::train::text::testing;
namespace h = gleaner::testing;

namespace {

using Ids = std::vector<int64_t>;

#define SKIP_WITHOUT_T5_FIXTURE()                                                         \
  if (!FileExists(FixtureSet("t5-tokenizer-ref-a") + "/tokenizer_2/tokenizer.json")) {    \
    GLEANER_SKIP("fixtures not found under " GLEANER_FIXTURES_DIR "/t5-tokenizer-ref-a"); \
  }

Json MustParseFile(const std::string& path) {
  Result<Json> j = ParseJson(h::ReadFile(path), 64);
  if (!j.ok()) FAIL(path << ": " << j.status().ToString());
  return *j;
}

T5Tokenizer MustLoad(const std::string& path) {
  Result<T5Tokenizer> t = T5Tokenizer::Load(path);
  if (!t.ok()) FAIL(t.status().ToString());
  return *t;
}

// One reference set: prompts, max_length, the padded ids, untruncated lengths and pieces.
struct RefSet {
  std::string tokenizer_dir;
  std::vector<std::string> prompts;
  size_t max_length = 0;
  std::vector<Ids> ids;
  Ids untruncated;
  std::vector<std::vector<std::string>> pieces;
};

RefSet ReadRefSet(const std::string& set) {
  RefSet r;
  // A set without its own tokenizer_2/ uses set a's (the same FLUX.1 files).
  r.tokenizer_dir = FileExists(set + "/tokenizer_2/tokenizer.json")
                        ? set + "/tokenizer_2"
                        : FixtureSet("t5-tokenizer-ref-a") + "/tokenizer_2";
  Json p = MustParseFile(set + "/prompts.json");
  r.max_length = p["max_length"].get<size_t>();
  for (const Json& s : p["prompts"]) r.prompts.push_back(s.get<std::string>());
  for (const Json& list : p["pieces"]) {
    r.pieces.emplace_back();
    for (const Json& s : list) r.pieces.back().push_back(s.get<std::string>());
  }
  const std::string bytes = h::ReadFile(set + "/ids.safetensors");
  Result<safetensors::ParsedFile> st = safetensors::Parse(bytes);
  if (!st.ok()) FAIL(set << "/ids.safetensors: " << st.status().ToString());
  const safetensors::TensorView& ids = st->tensors.at("input_ids");
  const safetensors::TensorView& lens = st->tensors.at("untruncated_length");
  REQUIRE(ids.dtype == safetensors::DType::kI64);
  REQUIRE(ids.shape == std::vector<int64_t>{int64_t(r.prompts.size()), int64_t(r.max_length)});
  REQUIRE(lens.shape == std::vector<int64_t>{int64_t(r.prompts.size())});
  REQUIRE(st->metadata.at("max_length") == std::to_string(r.max_length));
  for (size_t i = 0; i < r.prompts.size(); ++i) {
    Ids row(r.max_length);
    std::memcpy(row.data(), ids.data.data() + i * r.max_length * 8, r.max_length * 8);
    r.ids.push_back(row);
    int64_t n = 0;
    std::memcpy(&n, lens.data.data() + i * 8, 8);
    r.untruncated.push_back(n);
  }
  REQUIRE(r.pieces.size() == r.prompts.size());
  return r;
}

// --- a char map built here: a Darts double array in which every trie node owns a 256-unit block.
std::string CharsMapBlob(const std::map<std::string, std::string>& rules) {
  std::string strings;
  std::vector<std::pair<std::string, uint32_t>> entries;
  for (const auto& [from, to] : rules) {
    entries.emplace_back(from, uint32_t(strings.size()));
    strings += to;
    strings.push_back('\0');
  }
  std::vector<uint32_t> units(256);
  size_t next_block = 1;
  std::function<void(size_t, uint32_t, const std::vector<std::pair<std::string, uint32_t>>&)>
      place = [&](size_t pos, uint32_t label, const auto& keys) {
        const size_t base = 256 * next_block++;
        units.resize(base + 256, 0);
        bool leaf = false;
        std::map<uint8_t, std::vector<std::pair<std::string, uint32_t>>> children;
        for (const auto& [key, value] : keys) {
          if (key.empty()) {
            leaf = true;
            units[base] = value | (1U << 31);  // the leaf unit: label 0 under this node
          } else {
            children[uint8_t(key[0])].emplace_back(key.substr(1), value);
          }
        }
        units[pos] = label | (leaf ? 1U << 8 : 0) | uint32_t(pos ^ base) << 10;
        for (const auto& [c, sub] : children) place(base ^ c, c, sub);
      };
  place(0, 0, entries);
  std::string blob(4, '\0');
  const uint32_t size = uint32_t(units.size() * 4);
  for (int k = 0; k < 4; ++k) blob[size_t(k)] = char(size >> (8 * k) & 0xFF);
  for (uint32_t u : units) {
    for (int k = 0; k < 4; ++k) blob.push_back(char(u >> (8 * k) & 0xFF));
  }
  return blob + strings;
}

std::string Base64(std::string_view in) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < in.size(); i += 3) {
    uint32_t b = uint32_t(uint8_t(in[i])) << 16;
    if (i + 1 < in.size()) b |= uint32_t(uint8_t(in[i + 1])) << 8;
    if (i + 2 < in.size()) b |= uint8_t(in[i + 2]);
    out.push_back(kAlphabet[b >> 18 & 63]);
    out.push_back(kAlphabet[b >> 12 & 63]);
    out.push_back(i + 1 < in.size() ? kAlphabet[b >> 6 & 63] : '=');
    out.push_back(i + 2 < in.size() ? kAlphabet[b & 63] : '=');
  }
  return out;
}

const std::map<std::string, std::string> kRules = {
    {"A", "a"},              // a one-byte rule
    {"AB", "q"},             // the longest rule wins over "A"
    {"\t", " "},             // a blank
    {"\xef\xac\x81", "fi"},  // U+FB01 (a three-byte key)
    {"x", ""},               // dropped
    {"Z", " z "},            // blanks inside a replacement
};

// The tiny tokenizer.json: pieces with scores, the specials as added tokens.
Json TinyJson(const std::string& chars_map_b64) {
  const char* kVocab = R"([["<pad>", 0.0], ["</s>", 0.0], ["<unk>", 0.0],
      ["\u2581", -2.0], ["a", -3.0], ["b", -3.0], ["ab", -4.0], ["\u2581ab", -5.5],
      ["f", -3.0], ["i", -3.0], ["fi", -2.5], ["q", -1.0], ["z", -1.0],
      ["c", -2.0], ["d", -2.0], ["cd", -4.0], ["<extra_id_1>", 0.0], ["<extra_id_0>", 0.0]])";
  Json j = {
      {"version", "1.0"},
      {"model", {{"type", "Unigram"}, {"unk_id", 2}, {"byte_fallback", false}}},
      {"normalizer",
       {{"type", "Sequence"},
        {"normalizers",
         Json::array({{{"type", "Precompiled"}, {"precompiled_charsmap", chars_map_b64}},
                      {{"type", "Strip"}, {"strip_left", false}, {"strip_right", true}}})}}},
      {"pre_tokenizer",
       {{"type", "Metaspace"}, {"replacement", "\xe2\x96\x81"}, {"prepend_scheme", "always"}}},
  };
  j["model"]["vocab"] = *ParseJson(kVocab);
  Json added = Json::array();
  for (auto [id, content] : std::vector<std::pair<int, const char*>>{
           {0, "<pad>"}, {1, "</s>"}, {2, "<unk>"}, {16, "<extra_id_1>"}, {17, "<extra_id_0>"}}) {
    added.push_back({{"id", id},
                     {"content", content},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"special", true}});
  }
  j["added_tokens"] = added;
  return j;
}

T5Tokenizer Tiny(bool with_chars_map = true) {
  Result<T5Tokenizer> t =
      T5Tokenizer::FromJson(DumpJson(TinyJson(with_chars_map ? Base64(CharsMapBlob(kRules)) : "")));
  if (!t.ok()) FAIL(t.status().ToString());
  return *t;
}

std::string LoadError(const Json& j) {
  Result<T5Tokenizer> t = T5Tokenizer::FromJson(DumpJson(j), "t.json");
  REQUIRE_FALSE(t.ok());
  return t.status().message();
}

}  // namespace

TEST_CASE("T5 tokenizer reproduces every reference id and piece exactly", "[text][t5][fixture]") {
  SKIP_WITHOUT_T5_FIXTURE();
  std::vector<std::string> sets = ReferenceSets("t5-tokenizer", "prompts.json");
  REQUIRE_FALSE(sets.empty());
  for (const std::string& set : sets) {
    RefSet r = ReadRefSet(set);
    T5Tokenizer t = MustLoad(r.tokenizer_dir);
    CHECK(t.vocab_size() == 32100);
    CHECK(t.pad_id() == 0);
    CHECK(t.eos_id() == 1);
    CHECK(t.unk_id() == 2);
    REQUIRE(r.prompts.size() >= 7);
    for (size_t i = 0; i < r.prompts.size(); ++i) {
      INFO(set << " prompt " << i << ": " << Json(r.prompts[i]).dump());
      CHECK(t.Encode(r.prompts[i], r.max_length) == r.ids[i]);
      CHECK(int64_t(t.UntruncatedLength(r.prompts[i])) == r.untruncated[i]);
      std::vector<std::string> pieces = t.Pieces(r.prompts[i]);
      if (pieces.size() > r.max_length) {  // the reference lists the truncated ids' pieces
        Ids kept = t.Encode(r.prompts[i], r.max_length);
        pieces.clear();
        for (int64_t id : kept) pieces.push_back(t.IdToPiece(id));
      }
      CHECK(pieces == r.pieces[i]);
      Ids untruncated = t.Encode(r.prompts[i]);
      CHECK(untruncated.size() == size_t(r.untruncated[i]));
      CHECK(untruncated.back() == 1);
    }
  }
  // The file path works as well as the folder, and FLUX's default length pads to 512.
  T5Tokenizer t = MustLoad(FixtureSet("t5-tokenizer-ref-a") + "/tokenizer_2/tokenizer.json");
  Ids ids = t.Encode("a photo", 512);
  CHECK(ids.size() == 512);
  CHECK(Ids(ids.begin(), ids.begin() + 5) == Ids{3, 9, 1202, 1, 0});
  // The real char map: NFKC-like folding, blanks, dropped control characters.
  CHECK(t.Normalize("\xef\xac\x81 \xef\xbc\xa1\xe2\x91\xa0\t\n  x\x01y ") ==
        "\xe2\x96\x81"
        "fi\xe2\x96\x81"
        "A1\xe2\x96\x81x"
        "y");
}

TEST_CASE("tokenize CLI picks T5 from tokenizer.json and reproduces the reference ids",
          "[text][t5][cli][fixture]") {
  SKIP_WITHOUT_T5_FIXTURE();
  h::TempDir tmp("gleaner-t5-tokenize");
  RefSet r = ReadRefSet(FixtureSet("t5-tokenizer-ref-a"));
  Json prompts = r.prompts;
  REQUIRE(h::WriteFile(tmp.File("p.json"), DumpJson(prompts)));
  CliRun run =
      RunTrainCli({"tokenize", "--tokenizer", r.tokenizer_dir, "--prompts", tmp.File("p.json"),
                   "--max-length", std::to_string(r.max_length), "--out", tmp.File("o.json")},
                  tmp.path());
  INFO(run.err);
  REQUIRE(run.code == 0);
  Json out = MustParseFile(tmp.File("o.json"));
  REQUIRE(out.size() == r.prompts.size());
  for (size_t i = 0; i < r.prompts.size(); ++i) CHECK(out[i].get<Ids>() == r.ids[i]);
  run = RunTrainCli({"tokenize", "--tokenizer", r.tokenizer_dir + "/tokenizer.json", "--prompts",
                     tmp.File("p.json"), "--out", tmp.File("u.json")},
                    tmp.path());
  REQUIRE(run.code == 0);
  out = MustParseFile(tmp.File("u.json"));
  for (size_t i = 0; i < r.prompts.size(); ++i) CHECK(int64_t(out[i].size()) == r.untruncated[i]);

  auto expect = [&](std::vector<std::string> args, int code, const std::string& message) {
    args.insert(args.begin(), "tokenize");
    CliRun e = RunTrainCli(args, tmp.path());
    INFO(e.err);
    CHECK(e.code == code);
    CHECK(e.err.find(message) != std::string::npos);
    CHECK(std::count(e.err.begin(), e.err.end(), '\n') <= 2);  // one line (+ usage)
  };
  const std::string p = tmp.File("p.json"), o = tmp.File("x.json");
  expect({"--tokenizer", r.tokenizer_dir, "--prompts", p, "--pad-token", "!", "--out", o},
         kExitUsage, "--pad-token is for CLIP tokenizers");
  // A T5 folder (its tokenizer_config.json says so) without tokenizer.json.
  const std::string no_json = tmp.File("tokenizer_2");
  REQUIRE(::mkdir(no_json.c_str(), 0755) == 0);
  REQUIRE(
      h::WriteFile(no_json + "/tokenizer_config.json", R"({"tokenizer_class": "T5Tokenizer"})"));
  expect({"--tokenizer", no_json, "--prompts", p, "--out", o}, kExitFailed,
         no_json + "/tokenizer.json does not exist");
  REQUIRE(h::WriteFile(no_json + "/tokenizer.json", R"({"model": {"type": "Unigram", )"));
  expect({"--tokenizer", no_json, "--prompts", p, "--out", o}, kExitFailed,
         no_json + "/tokenizer.json: is not valid JSON");
  REQUIRE(h::WriteFile(no_json + "/tokenizer.json", R"({"model": {"type": "BPE"}})"));
  expect({"--tokenizer", no_json, "--prompts", p, "--out", o}, kExitFailed,
         no_json + "/tokenizer.json: model type \"BPE\" is not supported");
}

TEST_CASE("SentencePiece normaliser: longest char-map rule, blanks, dummy prefix", "[text][t5]") {
  Result<SentencePieceNormalizer> n = SentencePieceNormalizer::FromCharsMap(CharsMapBlob(kRules));
  REQUIRE(n.ok());
  const std::string S = "\xe2\x96\x81";
  CHECK(n->Normalize("AB") == S + "q");  // "AB" beats "A"
  CHECK(n->Normalize("AAB") == S + "aq");
  CHECK(n->Normalize("\t A\t\tb \t") == S + "a" + S + "b");  // blanks collapse and trim
  CHECK(n->Normalize("\xef\xac\x81x!") == S + "fi!");        // three-byte key; "x" dropped
  CHECK(n->Normalize("aZb") == S + "a" + S + "z" + S + "b");
  CHECK(n->Normalize("aZZb") == S + "a" + S + "z" + S + "z" + S + "b");  // no doubled blank
  CHECK(n->Normalize("Z") == S + "z");
  CHECK(n->Normalize(" \t ") == "");
  CHECK(n->Normalize("x") == "");  // only the dummy prefix was left
  CHECK(n->Normalize("") == "");
  CHECK(n->Normalize("a\xff"
                     "b") == S + "a\xef\xbf\xbd"
                                 "b");  // a bad byte is U+FFFD
  CHECK(n->Normalize("\xe2\x82") == S + "\xef\xbf\xbd\xef\xbf\xbd");
  CHECK(n->Normalize(S + "a" + S) == S + S + "a");  // a literal U+2581 at the end is trimmed too

  SentencePieceNormalizer identity;
  CHECK(identity.Normalize("  A\tB  ") == S + "A\tB");  // without a char map only " " is blank
  Result<SentencePieceNormalizer> no_prefix = SentencePieceNormalizer::FromCharsMap("", false);
  REQUIRE(no_prefix.ok());
  CHECK(no_prefix->Normalize(" a b") == "a" + S + "b");

  // Framing errors; a corrupt trie body only mis-normalises, never reads out of bounds.
  CHECK_FALSE(SentencePieceNormalizer::FromCharsMap("abc").ok());
  CHECK(SentencePieceNormalizer::FromCharsMap(std::string("\x10\0\0\0abcd", 8))
            .status()
            .message()
            .find("exceeds the blob") != std::string::npos);
  CHECK_FALSE(SentencePieceNormalizer::FromCharsMap(std::string("\x03\0\0\0abcd", 8)).ok());
  std::string junk(4 + 64, '\xff');
  junk[0] = 64;
  junk[1] = junk[2] = junk[3] = 0;
  Result<SentencePieceNormalizer> corrupt = SentencePieceNormalizer::FromCharsMap(junk + "zz");
  REQUIRE(corrupt.ok());
  for (int c = 0; c < 256; ++c) corrupt->Normalize(std::string(3, char(c)));
}

TEST_CASE("Unigram: best total score, ties to the earlier path, unknown runs merged",
          "[text][t5]") {
  T5Tokenizer t = Tiny();
  CHECK(t.vocab_size() == 18);
  CHECK(t.Encode("ab") == Ids{7, 1});                // ▁ab (-5.5) beats ▁ + ab (-6)
  CHECK(t.Encode("b ab") == Ids{3, 5, 7, 1});        // ▁ b ▁ab
  CHECK(t.Encode("aab") == Ids{3, 4, 6, 1});         // ▁ a ab (-9) beats ▁ab's absence
  CHECK(t.Encode("cd") == Ids{3, 15, 1});            // c+d ties cd (-4): cd was found first
  CHECK(t.Encode("fi") == Ids{3, 10, 1});            // fi (-2.5) beats f + i
  CHECK(t.Encode("\xef\xac\x81") == Ids{3, 10, 1});  // U+FB01 -> "fi" by the char map
  CHECK(t.Encode("AB") == Ids{3, 11, 1});            // -> "q"
  CHECK(t.Encode("a\xc3\xa9"
                 "b") == Ids{3, 4, 2, 5, 1});  // é is unknown
  CHECK(t.Encode("a\xc3\xa9\xc3\xa9\xe2\x82\xac"
                 "b") == Ids{3, 4, 2, 5, 1});                  // one run, one <unk>
  CHECK(t.Encode("\xc3\xa9 \xc3\xa9") == Ids{3, 2, 3, 2, 1});  // a "▁" between: two runs
  CHECK(t.Pieces("a\xc3\xa9") == std::vector<std::string>{"\xe2\x96\x81", "a", "<unk>", "</s>"});
  CHECK(t.Encode("") == Ids{1});
  CHECK(t.Encode("  \t ") == Ids{1});
  CHECK(t.Encode("a\xff") == Ids{3, 4, 2, 1});  // never fails: a bad byte is an unknown
}

TEST_CASE("added tokens split out as the slow T5Tokenizer does, then </s>, truncation, padding",
          "[text][t5]") {
  T5Tokenizer t = Tiny();
  CHECK(t.Encode("a<extra_id_0>b") == Ids{3, 4, 17, 3, 5, 1});  // each segment gets its ▁
  CHECK(t.Encode("<extra_id_1><extra_id_0>") == Ids{16, 17, 1});
  CHECK(t.Encode("a <pad> b") == Ids{3, 4, 0, 3, 5, 1});
  CHECK(t.Encode("<unk>") == Ids{2, 1});
  CHECK(t.Encode("<extra_id_2>").size() > 2);  // not an added token here: plain text
  // </s> is appended only when the ids do not end with it already.
  CHECK(t.Encode("</s>") == Ids{1});
  CHECK(t.Encode("a</s>") == Ids{3, 4, 1});
  CHECK(t.Encode("a</s> b") == Ids{3, 4, 1, 3, 5, 1});
  // <extra_id_N> eats Python whitespace on both sides (NBSP, U+3000); <pad> does not.
  CHECK(t.Encode("\xc2\xa0<extra_id_0>\xe3\x80\x80"
                 "a") == Ids{17, 3, 4, 1});
  CHECK(t.Encode("\xc2\xa0<pad>") == Ids{3, 2, 0, 1});
  CHECK(t.Encode("<extra_id_0>\xe2\x80\x8b"
                 "a") == Ids{17, 3, 2, 4, 1});  // ZWSP is no space
  // Truncation keeps max_length-1 text ids, then </s>; padding is <pad>.
  CHECK(t.Encode("a b a b", 4) == Ids{3, 4, 3, 1});
  CHECK(t.Encode("a", 5) == Ids{3, 4, 1, 0, 0});
  CHECK(t.Encode("", 3) == Ids{1, 0, 0});
  CHECK(t.Encode("a b", 4) == Ids{3, 4, 3, 1});  // 4 text ids + </s> > 4: the last id goes
  CHECK(t.Encode("a b", 5) == Ids{3, 4, 3, 5, 1});
  CHECK(t.Encode("a</s>b", 3) == Ids{3, 4, 1});
  CHECK(t.Encode("</s></s>b", 3) == Ids{1, 1, 0});  // kept ids end with </s>: none added
  CHECK(t.Encode("a b", 1) == Ids{1});
  CHECK(t.UntruncatedLength("a b a b") == 9);
  CHECK(t.IdToPiece(17) == "<extra_id_0>");
  CHECK(t.IdToPiece(18).empty());
  CHECK(t.IdToPiece(-1).empty());
  CHECK(T5Tokenizer().Encode("a", 3) == Ids{0, 0, 0});
}

TEST_CASE("tokenizer.json problems fail with one message naming the file and field", "[text][t5]") {
  Json good = TinyJson("");
  REQUIRE(T5Tokenizer::FromJson(DumpJson(good)).ok());
  auto with = [&](const std::string& pointer, const Json& value) {
    Json j = good;
    if (value.is_null()) {
      j.erase(pointer);
    } else {
      j[Json::json_pointer(pointer)] = value;
    }
    return LoadError(j);
  };
  CHECK(T5Tokenizer::FromJson("{", "t.json").status().message() == "t.json: is not valid JSON");
  CHECK(T5Tokenizer::FromJson("[]", "t.json").status().message() == "t.json: not a JSON object");
  CHECK(with("model", nullptr) == "t.json: has no model");
  CHECK(with("/model/type", "BPE") ==
        "t.json: model type \"BPE\" is not supported (a T5 tokenizer is Unigram)");
  CHECK(with("/model/vocab", Json::array()) ==
        "t.json: model.vocab is not a non-empty array of [piece, score] pairs");
  CHECK(with("/model/vocab/3", Json::array({"x"})) ==
        "t.json: model.vocab[3] is not a [piece, score] pair");
  CHECK(with("/model/vocab/5", Json::array({"a", -1.0})).find("repeats piece 4") !=
        std::string::npos);
  CHECK(with("/model/unk_id", 99) == "t.json: model.unk_id is not an id of model.vocab");
  CHECK(with("/model/byte_fallback", true) == "t.json: model.byte_fallback true is not supported");
  CHECK(with("/normalizer", Json{{"type", "Lowercase"}}) ==
        "t.json: normalizer \"Lowercase\" is not supported (a T5 tokenizer has Precompiled)");
  CHECK(with("/normalizer/normalizers/0/precompiled_charsmap", "AAA*")
            .find("t.json: precompiled_charsmap is not base64") == 0);
  CHECK(with("/normalizer/normalizers/0/precompiled_charsmap",
             Base64(std::string("\xff\0\0\0abcd", 8)))
            .find("t.json: the char map's trie size") == 0);
  CHECK(with("pre_tokenizer", nullptr) == "t.json: pre_tokenizer is missing (T5 uses Metaspace)");
  CHECK(with("/pre_tokenizer/replacement", "_") ==
        "t.json: the Metaspace replacement is not \"\xe2\x96\x81\"");
  CHECK(with("/pre_tokenizer", Json{{"type", "ByteLevel"}}).find("\"ByteLevel\" is not") !=
        std::string::npos);
  CHECK(with("/model/vocab/1", Json::array({"<eos>", 0.0})).find("added_tokens[1]") !=
        std::string::npos);
  CHECK(with("/added_tokens/0/id", "zero").find("added_tokens[0].id") != std::string::npos);
  Json no_eos = good;
  no_eos["model"]["vocab"][1] = Json::array({"<eos>", 0.0});
  no_eos["added_tokens"][1]["content"] = "<eos>";
  CHECK(LoadError(no_eos) == "t.json: has no </s> piece");
  // A Sequence of WhitespaceSplit + Metaspace is what newer converters write.
  Json seq = good;
  seq["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers", Json::array({{{"type", "WhitespaceSplit"}}, good["pre_tokenizer"]})}};
  CHECK(T5Tokenizer::FromJson(DumpJson(seq)).ok());
  CHECK(T5Tokenizer::Load("/nonexistent-dir")
            .status()
            .message()
            .find("/nonexistent-dir does not exist") != std::string::npos);
  h::TempDir tmp("gleaner-t5-load");
  CHECK(T5Tokenizer::Load(tmp.path()).status().message() ==
        tmp.File("tokenizer.json") +
            " does not exist (a T5 tokenizer is read from tokenizer.json)");
}
