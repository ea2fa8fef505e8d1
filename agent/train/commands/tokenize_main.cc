// `gleaner-train tokenize`: token ids of a JSON array of prompts, for checking the tokenizer
// against any reference from outside.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "agent/protocol/trainer_protocol.h"
#include "agent/train/commands/commands.h"
#include "agent/train/common/command_flags.h"
#include "agent/train/models/text/clip_tokenizer.h"
#include "shared/json.h"
#include "shared/native/files.h"

namespace gleaner::train {
namespace {

using namespace text;

constexpr const char* kUsage =
    "usage: gleaner-train tokenize --tokenizer DIR --prompts P.json [--max-length N] "
    "[--pad-token TOKEN] --out O.json";

Status Tokenize(const CommandFlags& flags, size_t max_length) {
  Result<ClipTokenizer> tok =
      ClipTokenizer::Load(flags.at("--tokenizer"), FlagOr(flags, "--pad-token"));
  if (!tok.ok()) return tok.status();
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
    Result<std::vector<int32_t>> ids = max_length ? tok->Encode(s, max_length) : tok->Encode(s);
    if (!ids.ok()) {
      return Status::Invalid(prompts_path + ": element " + std::to_string(i) + ": " +
                             ids.status().message());
    }
    out.push_back(*ids);
  }
  return files::WriteDurable(flags.at("--out"), DumpJson(out) + "\n");
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
