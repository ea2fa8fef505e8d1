// libFuzzer target for the trainer progress-line parser: any line is an event, NotFound or
// InvalidArgument; every parsed event formats back to a line that parses to the same event
// (error and class_images events carry no step).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "agent/protocol/trainer_protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string line(reinterpret_cast<const char*>(data), size);
  auto r = gleaner::ParseProgressEvent(line);
  if (!r.ok()) return 0;
  auto again = gleaner::ParseProgressEvent(gleaner::FormatProgressEvent(*r));
  using Type = gleaner::ProgressEvent::Type;
  if (!again.ok() || again->type != r->type ||
      (r->type != Type::kError && r->type != Type::kClassImages && again->step != r->step) ||
      (r->type == Type::kCheckpoint && again->dir != r->dir) ||
      (r->type == Type::kClassImages && again->count != r->count) ||
      (r->type == Type::kError && again->reason != r->reason))
    abort();
  return 0;
}
