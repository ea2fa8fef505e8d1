// libFuzzer target for samples.json (agent/protocol/sample_set.h), which the agent reads from the
// trainer's sample directory: any text is accepted or rejected with a Status; an accepted set
// keeps the documented limits and round-trips through SampleSetToJson.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "agent/protocol/sample_set.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  auto r = gleaner::train::ParseSampleSet(text);
  if (!r.ok()) return 0;
  if (r->prompts.empty() || r->prompts.size() > size_t(gleaner::train::kMaxSampleImages)) abort();
  if (r->resolution < 8 || r->resolution > 4096 || r->seconds < 0) abort();
  for (const auto& p : r->prompts) {
    if (p.prompt.size() > 1000 || p.negative_prompt.size() > 1000) abort();
  }
  auto again = gleaner::train::ParseSampleSet(gleaner::train::SampleSetToJson(*r));
  if (!again.ok() || again->step != r->step || again->seed != r->seed ||
      again->prompts.size() != r->prompts.size() || again->resolution != r->resolution) {
    abort();
  }
  return 0;
}
