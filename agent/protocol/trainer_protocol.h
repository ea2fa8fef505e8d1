// The contract between gleaner-agent (supervisor) and gleaner-train (trainer child process),
// shared by every job kind. docs/agent.md describes it for humans; this is its code.
//
// Invocation:  gleaner-train run --spec SPEC.json --work-dir DIR [--resume CKPT_DIR]
//                                [--cache-dir CACHE_DIR] [--stop-at-step N]
//   N: a replay of a training segment (a verification lease): train to step N (<= steps),
//     write the checkpoint of step N even if it is off the checkpoint_every schedule, exit
//     kExitDone with no samples, and no output unless N = steps (then the output is written as
//     in a full run: a replay of the last segment checks the export too). That checkpoint is
//     byte-identical to the one an uninterrupted run (or one stopped by SIGTERM right after step N)
//     writes at N, so two nodes' archives of it have the same sha256 where the kind is exact.
//   CACHE_DIR: outlives DIR (the agent keeps it across the job's leases on this node); a kind
//     may keep there what is costly to recompute, written durably and validated before reuse.
//     Without it, such files go in DIR. Kinds that have nothing to keep ignore it.
//   SPEC.json: the job, as TrainerSpec (trainer_spec.h) writes and parses it:
//              {"job_id", "kind", "params": {...}, "inputs": {"<name>": "<local path>"},
//               "steps": N, "epoch", "model": {"config", "format"}, "resume", "stop_at_step"}
//     inputs.dataset: the dataset file as uploaded (a latent safetensors file, or an image
//       archive: zip or tar).
//     inputs.model: a file (the UNet weights; model.config holds its config; model.format
//       "unet-safetensors"), or, when model.format is "diffusers" (kModelFormatDiffusers,
//       shared/model_manifest.h), a directory in diffusers layout
//       (model_index.json, unet/, vae/, text_encoder/, tokenizer/, for SDXL text_encoder_2/ and
//       tokenizer_2/; shared/model_manifest.h) whose files are hard links into (or copies of)
//       the agent's verified cache: read them, never write them. model.config is then optional
//       (unet/config.json is in the folder). Trainers that predate the field see a directory
//       where a file was expected and fail the job (exit 2) rather than misread it.
//   DIR/checkpoints/<step as %010d>/ : one directory per checkpoint; the trainer writes its files
//     into "<dir>.tmp", fsyncs them, writes MANIFEST.json LAST, fsyncs, renames to the final name,
//     fsyncs DIR/checkpoints. A directory without a valid manifest is not a checkpoint.
//   DIR/output/ : result files, then output MANIFEST.json last (same format, step = steps).
//     The output is the export of the checkpoint of the last step, which every run that trains
//     that step writes before its output (even off the checkpoint_every schedule): that
//     checkpoint's manifest records in meta.outputs (kManifestOutputsKey) the name, size and
//     sha256 of every output file, and DIR/output then holds exactly those files. A run resumed
//     from that checkpoint trains nothing, checks that its export gives the recorded files
//     (else exit kExitFailed) and writes them; the agent commits the checkpoint with them and
//     the coordinator completes the job only with them.
//   DIR/samples/<step as %010d>/ : images rendered with the weights of that step, written the
//     same way as a checkpoint (sample_set.h) and only after that step's checkpoint (or, for the
//     last step, before the output), so an interrupted sampling never costs a checkpoint.
// Progress: one line per event on stdout (see ProgressEvent). stderr is free-form diagnostics;
//   the agent keeps its last lines for failure reports.
// Signals: SIGTERM or SIGINT = checkpoint at the next step boundary, then exit kExitInterrupted
//   (before the first step, e.g. while rendering class images into CACHE_DIR: exit at once).
//   The trainer asks for PR_SET_PDEATHSIG so it dies with the agent.
// Exit codes below; any other code or a signal death is a crash.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "shared/json.h"
#include "shared/model_manifest.h"  // kModelFormatDiffusers: SPEC.json model.format
#include "shared/status.h"

namespace gleaner {

constexpr int kExitDone = 0;         // finished; DIR/output holds the result with its manifest
constexpr int kExitFailed = 2;       // the job cannot succeed (bad input, NaN loss, fail_at_step)
constexpr int kExitInterrupted = 3;  // stopped on a signal after writing a checkpoint
constexpr int kExitUsage = 64;       // bad command line (a bug in the agent, not the job)

constexpr const char* kManifestName = "MANIFEST.json";
constexpr const char* kManifestFormat = "gleaner-checkpoint";
constexpr int kManifestVersion = 1;

// One progress line. Wire form (one line, space-separated key=value, no spaces in values):
//   "gleaner progress step=120 steps=1000 loss=0.0123 samples_per_s=3.5"
//   "gleaner checkpoint step=100 dir=/path/to/DIR/checkpoints/0000000100"
//   "gleaner samples step=100 dir=/path/to/DIR/samples/0000000100 seconds=1.25"
//   "gleaner class_images count=200 seconds=310.5"   (before training; no step)
//   "gleaner done step=1000"
//   "gleaner error reason=<percent-encoded text>"
struct ProgressEvent {
  // kSamples and kClassImages are newer than the others: an agent that predates them logs the
  // line and ignores it.
  enum class Type { kProgress, kCheckpoint, kSamples, kDone, kError, kClassImages };
  Type type = Type::kProgress;
  int64_t step = 0;
  int64_t steps = 0;
  double loss = 0;  // NaN when absent
  bool has_loss = false;
  double samples_per_s = 0;
  double seconds = 0;  // kSamples, kClassImages: wall time spent rendering them
  int64_t count = 0;   // kClassImages: prior-preservation class images rendered
  std::string dir;     // kCheckpoint, kSamples
  std::string reason;  // kError, decoded
};

// Limits: a line is at most kMaxProgressLine bytes; a decoded reason is cut to kMaxEventText
// bytes and a longer decoded dir is rejected, so every parsed event formats back to a line
// within the limit (percent-encoding can triple a text's size).
constexpr size_t kMaxProgressLine = 8192;
constexpr size_t kMaxEventText = 2048;

// Formats one line. A reason longer than kMaxEventText is cut to it; a dir longer than that
// gives a line the parser rejects (checkpoint directories are short paths).
std::string FormatProgressEvent(const ProgressEvent& e);
// Parses one line (without the newline). Lines not starting with "gleaner " are not events:
// NotFound. Malformed events: InvalidArgument. Never crashes on any input.
Result<ProgressEvent> ParseProgressEvent(const std::string& line);

struct ManifestFile {
  std::string name;  // plain file name inside the directory, no '/'
  int64_t size = 0;
  std::string sha256;
};

// MANIFEST.json: {"format":"gleaner-checkpoint","version":1,"kind","job_id","step",
//                 "files":[{"name","size","sha256"}], "meta":{...}}
struct CheckpointManifest {
  std::string kind;
  std::string job_id;
  int64_t step = 0;
  std::vector<ManifestFile> files;
  Json meta = Json::object();
};

std::string ManifestToJson(const CheckpointManifest& m);

// meta key of the checkpoint of the last step: the output files it exports to.
constexpr const char* kManifestOutputsKey = "outputs";
// A list of files as a manifest writes them: [{"name","size","sha256"}].
Json FileListToJson(const std::vector<ManifestFile>& files);
// A list of output files (FileListToJson's form), checked like a manifest's own file list and
// not empty. Corruption when malformed.
Result<std::vector<ManifestFile>> ParseOutputList(const Json& list);
// ParseOutputList(m.meta.outputs). NotFound when the checkpoint records none (it is not of the
// last step).
Result<std::vector<ManifestFile>> ManifestOutputs(const CheckpointManifest& m);
// The same names, sizes and sha256, in any order.
bool SameFiles(std::vector<ManifestFile> a, std::vector<ManifestFile> b);
// Strict: checks format, version, types, file names (no '/', no "..", unique, not the manifest),
// sha256 syntax, sizes >= 0, at most 1024 files.
Result<CheckpointManifest> ParseManifest(const std::string& text);

}  // namespace gleaner
