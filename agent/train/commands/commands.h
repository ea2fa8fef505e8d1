// The subcommands of gleaner-train other than `run` (jobs/kinds.h), one entry point each: argv
// after the subcommand's name in, a process exit code out (0; kExitUsage for bad usage;
// kExitFailed, or a command's own documented codes, for failures), one readable line on stderr
// for every failure. Each is in commands/<name>_main.cc. Not thread-safe (each is a process's
// main).
#pragma once

namespace gleaner::train {

// `gleaner-train tokenize`: CLIP token ids of a JSON array of prompts.
int TokenizeMain(int argc, char** argv);
// `gleaner-train prepare-images`: a photo folder or archive to the encoded image dataset (built
// only with the image codecs: GLEANER_WITH_IMAGES).
int PrepareImagesMain(int argc, char** argv);

#ifdef GLEANER_WITH_TORCH
// `gleaner-train forward`: one denoiser forward pass of a fixture-shaped inputs file.
int ForwardMain(int argc, char** argv);
// `gleaner-train make-dataset`: a random latents-and-embeddings dataset.
int MakeDatasetMain(int argc, char** argv);
// `gleaner-train make-model --out W [--config C | --sdxl] [--seed S]`: random UNet weights;
// `make-model --diffusers DIR [--sdxl] [--seed S]`: a tiny diffusers model folder.
int MakeModelMain(int argc, char** argv);
// `gleaner-train text-encode`: the text encoders' outputs for a fixture-shaped inputs file.
int TextEncodeMain(int argc, char** argv);
// `gleaner-train vae`: VAE encode/decode of a fixture-shaped inputs file.
int VaeMain(int argc, char** argv);
// `gleaner-train schedule`: the schedulers' step outputs for a fixture-shaped inputs file.
int ScheduleMain(int argc, char** argv);
// `gleaner-train sample`: one image from a diffusers model folder.
int SampleMain(int argc, char** argv);
// `gleaner-train compare-checkpoints A B [--tolerance T]`: the worst per-tensor relative L2
// distance of two LoRAs as one JSON line; exit 0 within T, 1 outside.
int CompareCheckpointsMain(int argc, char** argv);
#endif

}  // namespace gleaner::train
