// A job's result files as a lease holder declares them ({name, sha256, size} objects): in the
// completion, in the commit of the checkpoint of the last step (the files that checkpoint
// exports to) and in a verifier's commit of a replay of the last segment. The three are compared
// in SQL as one canonical text, so "the output is the export of the final checkpoint" is a string
// equality (docs/architecture.md "Verified training").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "shared/json.h"
#include "shared/status.h"

namespace gleaner::core {

struct OutputFile {
  std::string name, sha256;
  int64_t size = 0;
};

// Reads body[field]: an array of 1 to 64 {name, sha256, size} objects with safe, distinct names
// (IsSafeName), sha256 as 64 lowercase hex digits and 0 <= size <= max_size. Absent: NotFound
// (the caller decides whether the field is required). Anything else malformed: Invalid, naming
// the element.
Status ReadOutputFiles(const Json& body, const char* field, int64_t max_size,
                       std::vector<OutputFile>* out);

// The canonical text of a set of output files: the JSON array of {name, sha256, size} sorted by
// name. Two declarations of the same files give the same text whatever their order.
std::string CanonicalOutputs(std::vector<OutputFile> files);

}  // namespace gleaner::core
