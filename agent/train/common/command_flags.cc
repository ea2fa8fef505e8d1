#include "agent/train/common/command_flags.h"

#include <cstring>

namespace gleaner::train {

Result<CommandFlags> ParseCommandFlags(int argc, char** argv,
                                       std::initializer_list<const char*> required,
                                       std::initializer_list<const char*> optional) {
  auto known = [&](const std::string& f) {
    for (const char* n : required) {
      if (f == n) return true;
    }
    for (const char* n : optional) {
      if (f == n) return true;
    }
    return false;
  };
  CommandFlags flags;
  for (int i = 0; i < argc; i += 2) {
    std::string f = argv[i];
    if (!known(f)) return Status::Invalid("unknown argument " + f);
    if (i + 1 >= argc) return Status::Invalid(f + " needs a value");
    if (!flags.emplace(f, argv[i + 1]).second) return Status::Invalid(f + " given twice");
  }
  for (const char* n : required) {
    if (!flags.count(n)) return Status::Invalid(std::string("missing ") + n);
  }
  return flags;
}

std::string FlagOr(const CommandFlags& flags, const char* name) {
  auto it = flags.find(name);
  return it == flags.end() ? "" : it->second;
}

}  // namespace gleaner::train
