// The `synthetic` job kind: a SHA-256 hash chain that makes lost or repeated steps visible.
//   s0 = SHA-256(ASCII decimal of seed); s_k = SHA-256(s_{k-1} || k as 8-byte little-endian).
// Checkpoint: state.json {"seed", "step", "state": hex s_k}. Output: chain.txt = hex(s_steps)+"\n".
// Params: steps (required), step_ms (0), checkpoint_every (0 = only when stopped), seed (0),
// fail_at_step / crash_at_step (tests: exit kExitFailed / abort() when about to train that step).
// Samples (job_params.h sample_*): at each due step (sample_set.h) a checkpoint is written
// first (also at the last step), then one deterministic PNG per prompt, sample_resolution
// square, drawn from SHA-256(hex s_k | sample_seed | i | prompt | negative prompt); sample_ms
// (a test hook) is slept before each image so tests can stop a trainer while it samples.
// Test hook: the environment variable GLEANER_SYNTHETIC_FAIL_AT_STEP overrides fail_at_step
// with a node's fault (a node whose trainers always fail: exit 1, which the agent attributes to
// the node, not kExitFailed). The chain itself is agent/protocol/synthetic_chain.h's (the agent's
// self-test checks outputs against it).
#pragma once

#include "agent/train/common/run_args.h"

namespace gleaner::train {

// Returns a process exit code (kExitDone, kExitFailed, kExitInterrupted).
int RunSynthetic(const RunArgs& args);

}  // namespace gleaner::train
