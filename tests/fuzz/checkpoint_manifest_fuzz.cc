// libFuzzer target for the checkpoint manifest reader: any text is accepted or rejected with a
// Status; an accepted manifest keeps the documented limits and round-trips through
// ManifestToJson, and so does the export its meta.outputs records.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "agent/protocol/trainer_protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  auto r = gleaner::ParseManifest(text);
  if (!r.ok()) return 0;
  if (r->files.size() > 1024) abort();
  for (const auto& f : r->files) {
    if (f.size < 0 || f.name.empty() || f.name.find('/') != std::string::npos || f.name == "..") {
      abort();
    }
  }
  // The last step's record of its export: checked like the file list, and it round-trips.
  auto outputs = gleaner::ManifestOutputs(*r);
  if (outputs.ok()) {
    if (outputs->empty() || outputs->size() > 1024) abort();
    for (const auto& f : *outputs) {
      if (f.size < 0 || f.name.empty() || f.name.find('/') != std::string::npos) abort();
    }
    auto back = gleaner::ParseOutputList(gleaner::FileListToJson(*outputs));
    if (!back.ok() || !gleaner::SameFiles(*back, *outputs)) abort();
  }
  auto again = gleaner::ParseManifest(gleaner::ManifestToJson(*r));
  if (!again.ok() || again->files.size() != r->files.size() || again->step != r->step ||
      again->job_id != r->job_id || again->kind != r->kind) {
    abort();
  }
  return 0;
}
