// `gleaner-train run --spec FILE --work-dir DIR [--resume DIR] [--cache-dir DIR]
// [--stop-at-step N]`: argument parsing
// and SPEC.json loading into RunArgs, what every job kind (jobs/kinds.h) is run with. Pure apart
// from reading the spec file.
#pragma once

#include <cstdint>
#include <string>

#include "agent/protocol/trainer_spec.h"
#include "shared/json.h"
#include "shared/status.h"

namespace gleaner::train {

struct RunArgs {
  std::string spec_path;
  std::string work_dir;
  std::string resume_dir;  // "" = start from scratch
  // Survives the job's leases on this node (agent-managed); "" = none. A kind keeps there what
  // is costly to recompute and validates it before reuse (lora-sd: the encoded image dataset).
  std::string cache_dir;
  // --stop-at-step N (0 = none): train to step N (<= the job's steps), write the checkpoint of
  // step N whether or not it is on the checkpoint_every schedule, exit kExitDone, write no
  // output and no samples: the replay of a verification. The checkpoint is byte-identical to
  // the one an uninterrupted run writes at N (or a run stopped by SIGTERM right after step N).
  int64_t stop_at_step = 0;
  TrainerSpec spec;  // SPEC.json (agent/protocol/trainer_spec.h)
};

// argv: the words after "run". InvalidArgument for unknown/missing flags or a SPEC.json that
// TrainerSpec::Parse refuses (the message names the field), and for --resume / --stop-at-step
// that contradict the spec's resume / stop_at_step; the message is one readable line. The flags
// and the spec's keys say the same; either alone is enough.
Result<RunArgs> ParseRunArgs(int argc, char** argv);

// The job's params as its kind parses them: spec.params with steps = spec.steps (the one owner of
// the job's length).
Json KindParams(const RunArgs& args);

}  // namespace gleaner::train
