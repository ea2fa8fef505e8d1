// Job kinds that gleaner-train can run, behind the contract in agent/protocol/trainer_protocol.h.
// Each kind is one entry point; kinds that need libtorch are compiled only with
// GLEANER_WITH_TORCH (and live entirely under agent/train/lora_sd/).
#pragma once

#include <cstdint>
#include <string>

#include "shared/json.h"

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
  Json spec;  // parsed SPEC.json
};

// Returns a process exit code (kExitDone, kExitFailed, kExitInterrupted).
int RunSynthetic(const RunArgs& args);

#ifdef GLEANER_WITH_TORCH
int RunLoraSd(const RunArgs& args);
// `gleaner-train forward ...` and `gleaner-train make-dataset ...` (argv after the subcommand).
int ForwardMain(int argc, char** argv);
int MakeDatasetMain(int argc, char** argv);
// `gleaner-train make-model --out W [--config C | --sdxl] [--seed S]`: random UNet weights;
// `make-model --diffusers DIR [--sdxl] [--seed S]`: a tiny diffusers model folder.
int MakeModelMain(int argc, char** argv);
// `gleaner-train vae ...` (vae/vae_main.cc) and `gleaner-train schedule ...`
// (sampling/schedule_main.cc).
int VaeMain(int argc, char** argv);
int ScheduleMain(int argc, char** argv);
// `gleaner-train sample ...` (sampling/sample_main.cc): one image from a diffusers model folder.
int SampleMain(int argc, char** argv);
// `gleaner-train compare-checkpoints A B [--tolerance T]` (lora_sd/compare_main.cc): the worst
// per-tensor relative L2 distance of two LoRAs as one JSON line; exit 0 within T, 1 outside.
int CompareCheckpointsMain(int argc, char** argv);
#endif

}  // namespace gleaner::train
