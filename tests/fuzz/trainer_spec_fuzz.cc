// libFuzzer target for SPEC.json (agent/protocol/trainer_spec.h): any bytes are tried as a
// spec. Each is accepted or rejected with InvalidArgument; whatever is accepted keeps the
// documented limits (a kind, steps in range, resume and stop within steps, a known model format
// only on the model input), validates, and its JSON parses back to the same JSON.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "agent/protocol/trainer_spec.h"
#include "shared/model_manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  gleaner::Result<gleaner::TrainerSpec> s = gleaner::TrainerSpec::Parse(text);
  if (!s.ok()) {
    if (s.status().code() != gleaner::Code::kInvalidArgument) abort();
    return 0;
  }
  if (s->kind.empty() || s->steps < 1 || s->steps > gleaner::kMaxSpecSteps) abort();
  if (s->resume_step < 0 || s->resume_step > s->steps) abort();
  if (s->stop_at_step < 0 || s->stop_at_step > s->steps) abort();
  if (s->stop_at_step > 0 && !s->resume_dir.empty() && s->stop_at_step <= s->resume_step) abort();
  for (const gleaner::TrainerInput& in : s->inputs) {
    if (in.name.empty() || in.path.empty()) abort();
    if (!in.format.empty() && (in.name != "model" || !gleaner::IsKnownModelFormat(in.format))) {
      abort();
    }
  }
  if (!s->Validate().ok()) abort();
  const std::string once = gleaner::DumpJson(s->ToJson());
  gleaner::Result<gleaner::TrainerSpec> again = gleaner::TrainerSpec::Parse(once);
  if (!again.ok() || gleaner::DumpJson(again->ToJson()) != once) abort();
  if (again->steps != s->steps || again->ModelFormat() != s->ModelFormat()) abort();
  return 0;
}
