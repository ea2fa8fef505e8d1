// `gleaner-train run --spec FILE --work-dir DIR [--resume DIR] [--cache-dir DIR]
// [--stop-at-step N]`: argument parsing
// and SPEC.json loading into train::RunArgs (agent/train/kinds.h). Pure apart from reading the spec
// file.
#pragma once

#include "agent/train/kinds.h"
#include "shared/status.h"

namespace gleaner::train {

// argv: the words after "run". InvalidArgument for unknown/missing flags or a spec that is not
// a JSON object with a string "kind"; the message is one readable line.
Result<RunArgs> ParseRunArgs(int argc, char** argv);

// Fields every kind reads from the spec.
std::string SpecKind(const RunArgs& args);
std::string SpecJobId(const RunArgs& args);
// spec.params (an empty object when absent).
const Json& SpecParams(const RunArgs& args);
// Local path of input `name` from spec.inputs ("" when absent).
std::string SpecInput(const RunArgs& args, const std::string& name);

}  // namespace gleaner::train
