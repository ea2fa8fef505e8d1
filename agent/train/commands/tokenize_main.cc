// `gleaner-train tokenize`: token ids of a JSON array of prompts, for checking the tokenizers
// against any reference from outside. The tokenizer's own files pick it: a T5 tokenizer
// (FLUX.1's tokenizer_2: tokenizer.json) or a CLIP one (vocab.json + merges.txt).
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "agent/protocol/trainer_protocol.h"
#include "agent/train/commands/commands.h"
#include "agent/train/common/command_flags.h"
#include "agent/train/models/text/clip_tokenizer.h"
#include "agent/train/models/text/t5_tokenizer.h"
#include "shared/json.h"
#include "shared/native/files.h"

namespace gleaner::train {
namespace {

using namespace text;

constexpr const char* kUsage =
    "usage: gleaner-train tokenize --tokenizer DIR|TOKENIZER_JSON --prompts P.json "
    "[--max-length N] [--pad-token TOKEN (CLIP only)] --out O.json";

// A T5 tokenizer: the path of a tokenizer.json, or a folder without CLIP's vocab.json +
// merges.txt that holds tokenizer.json or spiece.model, or whose tokenizer_config.json names a T5
// tokenizer class (then T5Tokenizer::Load names the missing tokenizer.json).
bool IsT5Tokenizer(const std::string& path) {
  if (!files::IsDir(path)) return files::Exists(path);
  if (files::Exists(files::Join(path, "vocab.json")) &&
      files::Exists(files::Join(path, "merges.txt"))) {
    return false;
  }
  if (files::Exists(files::Join(path, "tokenizer.json")) ||
      files::Exists(files::Join(path, "spiece.model"))) {
    return true;
  }
  Result<std::string> config = files::ReadAll(files::Join(path, "tokenizer_config.json"), 1 << 20);
  if (!config.ok()) return false;
  Result<Json> j = ParseJson(*config);
  if (!j.ok() || !j->is_object()) return false;
  auto cls = j->find("tokenizer_class");
  return cls != j->end() && cls->is_string() &&
         cls->get_ref<const std::string&>().rfind("T5Tokenizer", 0) == 0;
}

// Encodes every prompt of the JSON array at `prompts_path` with `encode` (one id array each).
template <typename Encode>
Status TokenizePrompts(const CommandFlags& flags, Encode encode) {
  const std::string& prompts_path = flags.at("--prompts");
  Result<std::string> text = files::ReadAll(prompts_path);
  if (!text.ok()) return text.status();
  Result<Json> prompts = ParseJson(*text);
  if (!prompts.ok()) return Status::Invalid(prompts_path + ": " + prompts.status().message());
  if (!prompts->is_array()) return Status::Invalid(prompts_path + ": not a JSON array of strings");
  Json out = Json::array();
  for (size_t i = 0; i < prompts->size(); ++i) {
    const Json& p = (*prompts)[i];
    if (!p.is_string()) {
      return Status::Invalid(prompts_path + ": element " + std::to_string(i) + " is not a string");
    }
    const std::string& s = p.get_ref<const std::string&>();
    auto ids = encode(s);
    if (!ids.ok()) {
      return Status::Invalid(prompts_path + ": element " + std::to_string(i) + ": " +
                             ids.status().message());
    }
    out.push_back(*ids);
  }
  return files::WriteDurable(flags.at("--out"), DumpJson(out) + "\n");
}

Status Tokenize(const CommandFlags& flags, size_t max_length) {
  const std::string& dir = flags.at("--tokenizer");
  if (IsT5Tokenizer(dir)) {
    Result<T5Tokenizer> tok = T5Tokenizer::Load(dir);
    if (!tok.ok()) return tok.status();
    return TokenizePrompts(flags, [&](const std::string& s) {
      return Result<std::vector<int64_t>>(tok->Encode(s, max_length));
    });
  }
  Result<ClipTokenizer> tok = ClipTokenizer::Load(dir, FlagOr(flags, "--pad-token"));
  if (!tok.ok()) return tok.status();
  return TokenizePrompts(flags, [&](const std::string& s) {
    return max_length ? tok->Encode(s, max_length) : tok->Encode(s);
  });
}

}  // namespace

int TokenizeMain(int argc, char** argv) {
  Result<CommandFlags> flags = ParseCommandFlags(argc, argv, {"--tokenizer", "--prompts", "--out"},
                                                 {"--max-length", "--pad-token"});
  size_t max_length = 0;
  if (flags.ok() && flags->count("--max-length")) {
    const std::string& v = flags->at("--max-length");
    char* end = nullptr;
    long long n = std::strtoll(v.c_str(), &end, 10);
    if (v.empty() || *end != '\0' || n < 2 || n > (1 << 20)) {
      flags = Status::Invalid("--max-length must be an integer in [2, 1048576]");
    } else {
      max_length = size_t(n);
    }
  }
  if (flags.ok() && flags->count("--pad-token") && IsT5Tokenizer(flags->at("--tokenizer"))) {
    flags = Status::Invalid("--pad-token is for CLIP tokenizers (a T5 tokenizer pads with <pad>)");
  }
  if (!flags.ok()) {
    std::fprintf(stderr, "gleaner-train tokenize: %s\n%s\n", flags.status().message().c_str(),
                 kUsage);
    return kExitUsage;
  }
  Status s = Tokenize(*flags, max_length);
  if (!s.ok()) {
    std::fprintf(stderr, "gleaner-train tokenize: %s\n", s.ToString().c_str());
    return kExitFailed;
  }
  return 0;
}

}  // namespace gleaner::train
