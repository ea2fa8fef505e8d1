// The frame of a `gleaner-train <name> --flag value ...` tool subcommand (vae, schedule, ...):
// flags into strings, the exit code contract, one error line.
//
// Contract: every flag takes one value; an unknown flag, a flag without a value or a missing
// required flag prints the usage line and returns kExitUsage (64). Otherwise `body` runs; a
// non-ok Status is printed as "gleaner-train <name>: <status>" on one stderr line and gives
// kExitFailed (2); ok gives 0. Single-threaded; no exceptions.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "shared/status.h"

namespace gleaner::train {

struct SubcommandFlag {
  const char* name;    // "--config"
  std::string* value;  // set when given
  bool required;
};

int RunSubcommand(const char* name, const char* usage, int argc, char** argv,
                  const std::vector<SubcommandFlag>& flags, const std::function<Status()>& body);

}  // namespace gleaner::train
