#include "agent/train/common/subcommand.h"

#include <cstdio>

#include "shared/trainer_protocol.h"

namespace gleaner::train {

int RunSubcommand(const char* name, const char* usage, int argc, char** argv,
                  const std::vector<SubcommandFlag>& flags, const std::function<Status()>& body) {
  auto usage_error = [&](const std::string& why) {
    std::fprintf(stderr, "gleaner-train %s: %s\nusage: %s\n", name, why.c_str(), usage);
    return kExitUsage;
  };
  std::vector<bool> seen(flags.size(), false);
  for (int i = 0; i < argc; ++i) {
    size_t f = 0;
    while (f < flags.size() && argv[i] != std::string(flags[f].name)) ++f;
    if (f == flags.size()) return usage_error(std::string("unknown argument ") + argv[i]);
    if (i + 1 >= argc) return usage_error(std::string(argv[i]) + " needs a value");
    *flags[f].value = argv[++i];
    seen[f] = true;
  }
  for (size_t f = 0; f < flags.size(); ++f) {
    if (flags[f].required && !seen[f]) {
      return usage_error(std::string(flags[f].name) + " is required");
    }
  }
  Status s = body();
  if (!s.ok()) {
    std::fprintf(stderr, "gleaner-train %s: %s\n", name, s.ToString().c_str());
    return kExitFailed;
  }
  return 0;
}

}  // namespace gleaner::train
