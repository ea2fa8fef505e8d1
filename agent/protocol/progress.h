// Progress lines on stdout (shared/trainer_protocol.h), one per call, flushed at once so the
// agent sees them immediately. Thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "agent/protocol/trainer_protocol.h"

namespace gleaner::train {

void EmitProgress(const ProgressEvent& e);
// Shorthands for the common events.
void EmitStep(int64_t step, int64_t steps, double loss, bool has_loss, double samples_per_s);
void EmitCheckpoint(int64_t step, const std::string& dir);
void EmitSamples(int64_t step, const std::string& dir, double seconds);
void EmitClassImages(int64_t count, double seconds);
void EmitDone(int64_t step);
void EmitError(const std::string& reason);

}  // namespace gleaner::train
