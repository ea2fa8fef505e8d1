// CLIP tokenizer: every reference case exactly (API and `gleaner-train tokenize`), tokenizer
// folders, BPE details on a tiny vocabulary, and one clear error per bad input.
#include "agent/train/models/text/clip_tokenizer.h"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "agent/protocol/trainer_protocol.h"
#include "shared/json.h"
#include "tests/skip.h"
#include "text_test_util.h"

using namespace gleaner;
using namespace gleaner::train::text;
using namespace gleaner::train::text::testing;
namespace h = gleaner::testing;

namespace {

using Ids = std::vector<int32_t>;

Ids MustEncode(const ClipTokenizer& t, const std::string& s, size_t max_length = 0) {
  Result<Ids> ids = max_length ? t.Encode(s, max_length) : t.Encode(s);
  if (!ids.ok()) FAIL(ids.status().ToString());
  return *ids;
}

Json MustParseFile(const std::string& path) {
  Result<Json> j = ParseJson(h::ReadFile(path), 64);
  if (!j.ok()) FAIL(path << ": " << j.status().ToString());
  return *j;
}

Ids ToIds(const Json& j) {
  Ids ids;
  for (const Json& v : j) ids.push_back(v.get<int32_t>());
  return ids;
}

#define SKIP_WITHOUT_TOKENIZER_FIXTURE()                                                    \
  if (!FileExists(FixtureSet("clip-tokenizer-ref-a") + "/vocab.json")) {                    \
    GLEANER_SKIP("fixtures not found under " GLEANER_FIXTURES_DIR "/clip-tokenizer-ref-a"); \
  }

// A tiny vocabulary: a, b and their word-final forms, two merges, the special tokens and "!".
constexpr const char* kTinyVocab =
    R"({"a": 0, "b": 1, "a</w>": 2, "b</w>": 3, "aa": 4, "ab</w>": 5, "!": 6,
        "<|startoftext|>": 7, "<|endoftext|>": 8})";
constexpr const char* kTinyMerges = "#version: 0.2\na a\na b</w>\n";

ClipTokenizer Tiny(const std::string& pad = "<|endoftext|>") {
  Result<ClipTokenizer> t = ClipTokenizer::FromFiles(kTinyVocab, kTinyMerges, pad);
  if (!t.ok()) FAIL(t.status().ToString());
  return *t;
}

std::string ErrorOf(const Result<ClipTokenizer>& r) {
  REQUIRE_FALSE(r.ok());
  return r.status().message();
}

}  // namespace

TEST_CASE("CLIP tokenizer reproduces every reference case exactly", "[text][fixture]") {
  SKIP_WITHOUT_TOKENIZER_FIXTURE();
  const std::string vocab_dir = FixtureSet("clip-tokenizer-ref-a");
  Result<ClipTokenizer> eot = ClipTokenizer::Load(vocab_dir);
  Result<ClipTokenizer> bang = ClipTokenizer::Load(vocab_dir, "!");
  REQUIRE(eot.ok());
  REQUIRE(bang.ok());
  CHECK(eot->pad_id() == 49407);
  CHECK(bang->pad_id() == 0);
  for (const std::string& set : ReferenceSets("clip-tokenizer", "cases.json")) {
    Json cases = MustParseFile(set + "/cases.json")["cases"];
    REQUIRE(cases.size() >= 100);
    for (const Json& c : cases) {
      const std::string& text = c["text"].get_ref<const std::string&>();
      INFO(set << " case " << c["id"].get<int>() << ": " << c["text"].dump());
      CHECK(MustEncode(*eot, text) == ToIds(c["ids"]));
      CHECK(MustEncode(*eot, text, 77) == ToIds(c["ids_77_pad_eot"]));
      CHECK(MustEncode(*bang, text, 77) == ToIds(c["ids_77_pad_bang"]));
      if (c.contains("ids_pad_bang_untruncated")) {
        CHECK(MustEncode(*bang, text) == ToIds(c["ids_pad_bang_untruncated"]));
      }
    }
  }
}

TEST_CASE("tokenize CLI reproduces the reference cases, usage exits 64, failures 2",
          "[text][cli][fixture]") {
  SKIP_WITHOUT_TOKENIZER_FIXTURE();
  h::TempDir tmp("gleaner-tokenize");
  const std::string tok_dir = FixtureSet("clip-tokenizer-ref-a");
  Json cases = MustParseFile(tok_dir + "/cases.json")["cases"];
  Json prompts = Json::array();
  for (const Json& c : cases) prompts.push_back(c["text"]);
  REQUIRE(h::WriteFile(tmp.File("p.json"), DumpJson(prompts)));

  CliRun run = RunTrainCli({"tokenize", "--tokenizer", tok_dir, "--prompts", tmp.File("p.json"),
                            "--out", tmp.File("o.json")},
                           tmp.path());
  REQUIRE(run.code == 0);
  Json out = MustParseFile(tmp.File("o.json"));
  REQUIRE(out.size() == cases.size());
  for (size_t i = 0; i < cases.size(); ++i) CHECK(out[i] == cases[i]["ids"]);

  run = RunTrainCli({"tokenize", "--tokenizer", tok_dir, "--prompts", tmp.File("p.json"),
                     "--max-length", "77", "--pad-token", "!", "--out", tmp.File("b.json")},
                    tmp.path());
  REQUIRE(run.code == 0);
  out = MustParseFile(tmp.File("b.json"));
  for (size_t i = 0; i < cases.size(); ++i) CHECK(out[i] == cases[i]["ids_77_pad_bang"]);

  // A tokenizer folder whose special_tokens_map.json sets the pad token (SDXL's tokenizer_2).
  const std::string folder = tmp.File("tokenizer_2");
  REQUIRE(::mkdir(folder.c_str(), 0755) == 0);
  REQUIRE(::symlink((tok_dir + "/vocab.json").c_str(), (folder + "/vocab.json").c_str()) == 0);
  REQUIRE(::symlink((tok_dir + "/merges.txt").c_str(), (folder + "/merges.txt").c_str()) == 0);
  REQUIRE(h::WriteFile(folder + "/special_tokens_map.json", R"({"pad_token": "!"})"));
  run = RunTrainCli({"tokenize", "--tokenizer", folder, "--prompts", tmp.File("p.json"),
                     "--max-length", "77", "--out", tmp.File("c.json")},
                    tmp.path());
  REQUIRE(run.code == 0);
  out = MustParseFile(tmp.File("c.json"));
  for (size_t i = 0; i < cases.size(); ++i) CHECK(out[i] == cases[i]["ids_77_pad_bang"]);

  auto expect = [&](std::vector<std::string> args, int code, const std::string& message) {
    args.insert(args.begin(), "tokenize");
    CliRun r = RunTrainCli(args, tmp.path());
    INFO(r.err);
    CHECK(r.code == code);
    CHECK(r.err.find(message) != std::string::npos);
  };
  const std::string p = tmp.File("p.json"), o = tmp.File("x.json");
  expect({"--tokenizer", tok_dir, "--prompts", p}, kExitUsage, "missing --out");
  expect({"--tokenizer", tok_dir, "--prompts", p, "--out", o, "--max-length", "1"}, kExitUsage,
         "--max-length must be an integer");
  expect({"--tokenizer", tok_dir, "--prompts", p, "--out", o, "--bogus", "1"}, kExitUsage,
         "unknown argument --bogus");
  expect({"--tokenizer", tmp.File("nope"), "--prompts", p, "--out", o}, kExitFailed, "vocab.json");
  REQUIRE(h::WriteFile(tmp.File("obj.json"), R"({"a": 1})"));
  expect({"--tokenizer", tok_dir, "--prompts", tmp.File("obj.json"), "--out", o}, kExitFailed,
         "not a JSON array of strings");
  REQUIRE(h::WriteFile(tmp.File("num.json"), R"(["ok", 3])"));
  expect({"--tokenizer", tok_dir, "--prompts", tmp.File("num.json"), "--out", o}, kExitFailed,
         "element 1 is not a string");
  expect({"--tokenizer", tok_dir, "--prompts", p, "--pad-token", "<pad>", "--out", o}, kExitFailed,
         "pad token \"<pad>\" is not in vocab.json");
}

TEST_CASE("tokenizer folder: pad token precedence and foreign special tokens", "[text]") {
  h::TempDir tmp("gleaner-tokenizer-dir");
  REQUIRE(h::WriteFile(tmp.File("vocab.json"), kTinyVocab));
  REQUIRE(h::WriteFile(tmp.File("merges.txt"), kTinyMerges));
  Result<ClipTokenizer> t = ClipTokenizer::Load(tmp.path());
  REQUIRE(t.ok());
  CHECK(t->pad_token() == "<|endoftext|>");
  REQUIRE(h::WriteFile(tmp.File("tokenizer_config.json"),
                       R"({"pad_token": "!", "model_max_length": 77, "do_lower_case": true})"));
  t = ClipTokenizer::Load(tmp.path());
  REQUIRE(t.ok());
  CHECK(t->pad_id() == 6);
  REQUIRE(h::WriteFile(tmp.File("special_tokens_map.json"),
                       R"({"pad_token": {"content": "<|endoftext|>", "lstrip": false},
                           "bos_token": {"content": "<|startoftext|>"}})"));
  t = ClipTokenizer::Load(tmp.path());
  REQUIRE(t.ok());
  CHECK(t->pad_id() == 8);  // special_tokens_map.json wins over tokenizer_config.json
  t = ClipTokenizer::Load(tmp.path(), "!");
  REQUIRE(t.ok());
  CHECK(t->pad_id() == 6);  // and an explicit pad token over both
  REQUIRE(h::WriteFile(tmp.File("special_tokens_map.json"), R"({"bos_token": "<s>"})"));
  CHECK(ErrorOf(ClipTokenizer::Load(tmp.path())).find("bos_token \"<s>\" is not supported") !=
        std::string::npos);
  REQUIRE(h::WriteFile(tmp.File("special_tokens_map.json"), R"({"pad_token": 5})"));
  CHECK(ErrorOf(ClipTokenizer::Load(tmp.path())).find("pad_token is not a string") !=
        std::string::npos);
}

TEST_CASE("BPE merges by rank, all occurrences left to right, specials split out", "[text]") {
  ClipTokenizer t = Tiny();
  CHECK(MustEncode(t, "") == Ids{7, 8});
  CHECK(MustEncode(t, "a") == Ids{7, 2, 8});
  CHECK(MustEncode(t, "ab") == Ids{7, 5, 8});
  CHECK(MustEncode(t, "AB") == Ids{7, 5, 8});          // lowercased
  CHECK(MustEncode(t, "aaa") == Ids{7, 4, 2, 8});      // (a a) merges at 0, then 2 is a</w>
  CHECK(MustEncode(t, "aaaa") == Ids{7, 4, 0, 2, 8});  // (a a) at 0; 1 is taken; a a</w> no merge
  CHECK(MustEncode(t, "c") == Ids{7, 8, 8});           // unknown symbol -> <|endoftext|>
  CHECK(MustEncode(t, "a<|endoftext|>b") == Ids{7, 2, 8, 3, 8});
  CHECK(MustEncode(t, "a <|ENDOFTEXT|>") == Ids{7, 2, 8, 8});  // lowercased, then the pattern
  CHECK(MustEncode(t, "a!!") == Ids{7, 2, 6, 8, 8});           // "!</w>" unknown -> unk
  CHECK(MustEncode(Tiny("!"), "a!!") == Ids{7, 2, 6, 6, 8});   // pad "!" is split out
  // Truncation keeps bos + first max_length-2 + eos; padding uses the pad id.
  CHECK(MustEncode(t, "a b a b", 4) == Ids{7, 2, 3, 8});
  CHECK(MustEncode(Tiny("!"), "a", 5) == Ids{7, 2, 8, 6, 6});
  CHECK(MustEncode(t, "a", 2) == Ids{7, 8});
}

TEST_CASE("tokenizer refuses bad vocab, merges and prompts with one clear error", "[text]") {
  auto from = [](const std::string& vocab, const std::string& merges,
                 const std::string& pad = "<|endoftext|>") {
    return ErrorOf(ClipTokenizer::FromFiles(vocab, merges, pad));
  };
  CHECK(from("{", kTinyMerges).find("vocab.json:") == 0);
  CHECK(from("[1]", kTinyMerges) == "vocab.json: expected a JSON object of token ids");
  CHECK(from(R"({"a": "x", "<|startoftext|>": 1, "<|endoftext|>": 2})", kTinyMerges) ==
        "vocab.json: the id of \"a\" is not an integer in [0, 2^31)");
  CHECK(from(R"({"a": -1})", kTinyMerges).find("the id of \"a\"") != std::string::npos);
  CHECK(from(R"({"a": 0, "<|endoftext|>": 1})", kTinyMerges) ==
        "vocab.json: has no <|startoftext|>");
  CHECK(from(kTinyVocab, "a b\n") == "merges.txt: the first line is not a \"#version\" header");
  CHECK(from(kTinyVocab, "#version: 0.2\na b\na b c\n") ==
        "merges.txt: line 3 does not hold two symbols");
  CHECK(from(kTinyVocab, "#version: 0.2\n\xff b\n") == "merges.txt: invalid UTF-8 at byte 14");
  CHECK(from(kTinyVocab, kTinyMerges, "zzz") == "pad token \"zzz\" is not in vocab.json");
  CHECK(ErrorOf(ClipTokenizer::Load("/nonexistent-dir")).find("/nonexistent-dir/vocab.json") !=
        std::string::npos);

  ClipTokenizer t = Tiny();
  Result<Ids> bad = t.Encode("ok \xc3\x28");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message() == "prompt: invalid UTF-8 at byte 3");
  for (const char* s : {"\xed\xa0\x80", "\xc0\xaf", "\xf4\x90\x80\x80", "\xe2\x82"}) {
    CHECK_FALSE(t.Encode(s).ok());  // surrogate, overlong, above U+10FFFF, truncated
  }
  CHECK(t.Encode("a", 1).status().message() == "max_length must be at least 2");
  CHECK(ClipTokenizer().Encode("a").status().message() == "tokenizer not loaded");
}
