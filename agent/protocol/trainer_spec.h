// TrainerSpec: SPEC.json, the job as gleaner-agent hands it to gleaner-train (trainer_protocol.h
// has the invocation, the directories and the progress lines). The agent writes SPEC.json only
// through ToJson; a trainer reads it with Parse.
//
// Wire form (one JSON object; keys sorted as nlohmann writes them):
//   {"job_id": "j_…",                     optional ("" for a local run)
//    "kind": "lora-sd" | "synthetic" | …,  required
//    "params": {…},                        the job's params object, parsed by the kind (its
//                                          sample settings, sample_*, included:
//                                          shared/job_params.h)
//    "steps": N,                           the job's total steps (see below)
//    "epoch": E,                           the lease's epoch (0 or absent: not given)
//    "inputs": {"<name>": "<local path>"}, a file, or a directory for a folder input
//    "model": {"config": {…},              the UNet config (a single-file model needs it)
//              "format": "diffusers" | "unet-safetensors"},   the form of inputs.model
//    "resume": {"dir": "<checkpoint dir>", "step": K},   the verified checkpoint to resume from
//    "stop_at_step": S}                    a replay: train to S (resume.step < S <= steps)
//
// One owner for steps: TrainerSpec::steps (the claim's job.steps, which the coordinator stores
// from the normalised params). ToJson also writes it as params.steps, so a kind that parses its
// params whole sees the same number; Parse refuses a params.steps that differs from steps, and
// takes params.steps when steps is absent (specs written by hand for local runs).
//
// resume and stop_at_step are also on the trainer's command line (CommandLine below): trainers
// that predate these keys read them there. Both come from this one struct.
//
// Errors: Parse is strict (unknown keys, wrong types, out-of-range numbers, an unknown model
// format, a format without a model input) and answers InvalidArgument with a message naming the
// field ("spec.model.format …"). Portable: no exceptions, no I/O; never crashes on any input.
// Thread-compatible value type.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "shared/json.h"
#include "shared/status.h"

namespace gleaner {

constexpr size_t kMaxSpecBytes = 16 << 20;  // what a trainer reads of SPEC.json at most
constexpr int64_t kMaxSpecSteps = int64_t(1) << 40;
constexpr size_t kMaxSpecPathBytes = 4096;

struct TrainerInput {
  std::string name;    // [A-Za-z0-9_.-], 1..64 bytes: "model", "dataset"
  std::string path;    // a local path, not empty
  std::string format;  // only the input named "model": kModelFormat*, or "" (not said)
};

struct TrainerSpec {
  std::string job_id;
  std::string kind;
  Json params = Json::object();
  int64_t steps = 0;  // >= 1: the one owner of the job's length
  int64_t epoch = 0;
  std::vector<TrainerInput> inputs;  // sorted by name, names unique (Parse gives them so)
  Json model_config;                 // null when the job has none
  std::string resume_dir;            // "" = train from scratch
  int64_t resume_step = 0;           // with resume_dir: the checkpoint's step
  int64_t stop_at_step = 0;          // > 0: a replay to this step

  static Result<TrainerSpec> Parse(std::string_view json);
  Json ToJson() const;
  // What Parse would say of DumpJson(ToJson()), plus what ToJson cannot show (two inputs with
  // one name, a format on an input other than "model"). The agent checks a spec before it
  // writes it.
  Status Validate() const;

  const TrainerInput* Input(std::string_view name) const;  // nullptr when absent
  // The model input's format ("" when there is no model input or it does not say).
  std::string ModelFormat() const;
  // gleaner-train's argv for this spec written at spec_path: "run --spec P --work-dir D",
  // then --stop-at-step, --resume and --cache-dir (when cache_dir is not empty).
  std::vector<std::string> CommandLine(const std::string& trainer, const std::string& spec_path,
                                       const std::string& work_dir,
                                       const std::string& cache_dir) const;
};

}  // namespace gleaner
