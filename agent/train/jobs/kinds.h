// Job kinds that gleaner-train can run, behind the contract in agent/protocol/trainer_protocol.h.
// Each kind is one entry point in its folder under jobs/; kinds that need libtorch are compiled
// only with GLEANER_WITH_TORCH. The other subcommands are in commands/commands.h.
#pragma once

#include "agent/train/common/run_args.h"

namespace gleaner::train {

// Returns a process exit code (kExitDone, kExitFailed, kExitInterrupted).
int RunSynthetic(const RunArgs& args);

#ifdef GLEANER_WITH_TORCH
int RunLoraSd(const RunArgs& args);  // jobs/lora/run.cc
#endif

}  // namespace gleaner::train
