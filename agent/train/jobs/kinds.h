// Job kinds that gleaner-train can run, behind the contract in agent/protocol/trainer_protocol.h.
// Each kind is one entry point, declared in its folder under jobs/ and gathered here; kinds that
// need libtorch are compiled only with GLEANER_WITH_TORCH. The other subcommands are in
// commands/commands.h.
#pragma once

#include "agent/train/jobs/synthetic/synthetic.h"
#ifdef GLEANER_WITH_TORCH
#include "agent/train/jobs/lora/run.h"
#endif
