// Sample images of one training step, as agent/protocol/trainer_protocol.h specifies:
//   WORK_DIR/samples/<step as %010d>/ written like a checkpoint directory (checkpoint_dir.h):
//     <i>.png for i = 0..n-1 (one per sample prompt, in the job's order), then samples.json,
//     then MANIFEST.json last (kind and job id as for checkpoints, step = the step).
//   samples.json: {"format":"gleaner-samples","version":1,"step","seed","seconds",
//                  "resolution","sample_steps","guidance_scale",
//                  "prompts":[{"prompt","negative_prompt"}]}   (one entry per <i>.png)
// The trainer renders them right after the step's checkpoint is durable, writes the set, then
// emits "gleaner samples step=S dir=D seconds=T". A stop signal while rendering abandons the set
// (its ".tmp" directory is never published); the checkpoint it followed is already safe. A
// trainer resumed from a checkpoint at a sampling step renders that step's set again: samples
// are deterministic, and the coordinator keeps the first commit of a step.
// Not thread-safe; one writer per directory. Errors: Status (kIo, kCorruption, kInvalidArgument).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "agent/protocol/trainer_protocol.h"
#include "shared/json.h"
#include "shared/status.h"

namespace gleaner::train {

constexpr const char* kSampleSetName = "samples.json";
constexpr const char* kSampleSetFormat = "gleaner-samples";
constexpr int kSampleSetVersion = 1;
constexpr int kMaxSampleImages = 8;

struct SamplePrompt {
  std::string prompt;
  std::string negative_prompt;
};

struct SampleSet {
  int64_t step = 0;
  int64_t seed = 0;
  double seconds = 0;  // wall time spent rendering the set
  int64_t resolution = 0;
  int64_t sample_steps = 0;
  double guidance_scale = 0;
  std::vector<SamplePrompt> prompts;  // prompts[i] is <i>.png
};

// WORK_DIR/samples/<step as %010d>.
std::string SampleDirFor(const std::string& work_dir, int64_t step);
// The file name of image i: "<i>.png".
std::string SampleImageName(int i);

// The job's sample params (job_params.h, normalised) as a SampleSet without step and seconds.
// NotFound when the job asks for no samples.
Result<SampleSet> SampleSetFromParams(const Json& params);
// True when a step is due for samples: a multiple of sample_every, or the last step.
bool SampleDue(int64_t step, int64_t steps, int64_t sample_every);

// Writes the set durably: pngs[i] is image i (pngs.size() == set.prompts.size()).
Status WriteSampleSet(const std::string& dir, const std::string& kind, const std::string& job_id,
                      const SampleSet& set, const std::vector<std::string>& pngs);

std::string SampleSetToJson(const SampleSet& set);
// Strict: format, version, types, 1..kMaxSampleImages prompts, limits as in job_params.h.
Result<SampleSet> ParseSampleSet(const std::string& text);

// Verifies DIR like a checkpoint (every file's size and sha256), parses samples.json and checks
// that the manifest lists exactly <0..n-1>.png and samples.json, at the same step.
Result<SampleSet> VerifySampleDir(const std::string& dir);

}  // namespace gleaner::train
