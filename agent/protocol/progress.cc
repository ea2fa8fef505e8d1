#include "agent/protocol/progress.h"

#include <cstdio>
#include <mutex>

namespace gleaner::train {

void EmitProgress(const ProgressEvent& e) {
  static std::mutex mu;
  std::string line = FormatProgressEvent(e) + "\n";
  std::lock_guard<std::mutex> lock(mu);
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fflush(stdout);
}

void EmitStep(int64_t step, int64_t steps, double loss, bool has_loss, double samples_per_s) {
  ProgressEvent e;
  e.type = ProgressEvent::Type::kProgress;
  e.step = step;
  e.steps = steps;
  e.loss = loss;
  e.has_loss = has_loss;
  e.samples_per_s = samples_per_s;
  EmitProgress(e);
}

void EmitCheckpoint(int64_t step, const std::string& dir) {
  ProgressEvent e;
  e.type = ProgressEvent::Type::kCheckpoint;
  e.step = step;
  e.dir = dir;
  EmitProgress(e);
}

void EmitSamples(int64_t step, const std::string& dir, double seconds) {
  ProgressEvent e;
  e.type = ProgressEvent::Type::kSamples;
  e.step = step;
  e.dir = dir;
  e.seconds = seconds;
  EmitProgress(e);
}

void EmitClassImages(int64_t count, double seconds) {
  ProgressEvent e;
  e.type = ProgressEvent::Type::kClassImages;
  e.count = count;
  e.seconds = seconds;
  EmitProgress(e);
}

void EmitDone(int64_t step) {
  ProgressEvent e;
  e.type = ProgressEvent::Type::kDone;
  e.step = step;
  EmitProgress(e);
}

void EmitError(const std::string& reason) {
  ProgressEvent e;
  e.type = ProgressEvent::Type::kError;
  e.reason = reason;
  EmitProgress(e);
}

}  // namespace gleaner::train
