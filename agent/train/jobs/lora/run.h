// The lora-sd job kind (diffusion LoRA; docs/training.md): SPEC.json's params (LoraSdParams,
// shared/job_params.h) and inputs (job_inputs.h) -> training (training/trainer.h) -> checkpoints,
// samples, the output LoRA files, progress lines (agent/protocol/trainer_protocol.h). Returns a
// process exit code (kExitDone, kExitFailed for the job's own fault, kExitInterrupted).
#pragma once

#include "agent/train/common/run_args.h"

namespace gleaner::train {

int RunLoraSd(const RunArgs& args);

}  // namespace gleaner::train
