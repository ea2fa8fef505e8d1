// `--name value` flags of gleaner-train's subcommands (tokenize, text-encode, vae, schedule).
//
// Contract: every flag takes exactly one value; an unknown, repeated or value-less flag, or a
// missing required one, is an InvalidArgument whose message is one readable line (the caller
// prints it with the usage and exits kExitUsage).
#pragma once

#include <initializer_list>
#include <map>
#include <string>

#include "shared/status.h"

namespace gleaner::train {

using CommandFlags = std::map<std::string, std::string>;  // "--out" -> value

Result<CommandFlags> ParseCommandFlags(int argc, char** argv,
                                       std::initializer_list<const char*> required,
                                       std::initializer_list<const char*> optional);

// The value of a flag, or "" when absent.
std::string FlagOr(const CommandFlags& flags, const char* name);

}  // namespace gleaner::train
