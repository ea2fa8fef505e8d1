// RunLoraSd: the lora-sd job kind behind the trainer contract (agent/protocol/trainer_protocol.h).
//
// SPEC.json: params (see LoraSdParams, shared/job_params.h); the base model and the data as
// job_inputs.h reads them (a UNet weights file and latents, or a diffusers folder and photos).
#include "agent/train/jobs/lora/run.h"

#include <chrono>
#include <cstdio>
#include <map>

#include "agent/protocol/checkpoint_dir.h"
#include "agent/protocol/progress.h"
#include "agent/protocol/trainer_protocol.h"
#include "agent/train/common/run_args.h"
#include "agent/train/common/signals.h"
#include "agent/train/jobs/lora/job_inputs.h"
#include "agent/train/nn/torch_compat.h"
#include "agent/train/training/trainer.h"
#include "agent/train/training/training_samples.h"
#include "shared/model_manifest.h"
#include "shared/native/files.h"

namespace gleaner::train {
namespace {

using namespace lora;
using namespace training;

int Fail(const Status& s) {
  EmitError(s.message());
  std::fprintf(stderr, "lora-sd: %s\n", s.ToString().c_str());
  return kExitFailed;
}

// The family of the job's model, from its files as the coordinator read it (a diffusers folder
// with transformer/ is FLUX), so its params parse as they were normalised.
ModelFamily ModelFamilyOf(const TrainerSpec& spec) {
  const TrainerInput* model = spec.Input("model");
  if (model == nullptr || spec.ModelFormat() != kModelFormatDiffusers) return ModelFamily::kSdUnet;
  return files::IsDir(model->path + "/transformer") ? ModelFamily::kFlux : ModelFamily::kSdUnet;
}

int Run(const RunArgs& args) {
  const std::string& job_id = args.spec.job_id;
  const Json params = KindParams(args);  // with steps = spec.steps, the one owner
  // The coordinator stored normalised params; parsing them again is idempotent and keeps the
  // names, defaults and ranges in one place (shared/job_params.h).
  Result<LoraSdParams> p = LoraSdParams::Parse(params, ModelFamilyOf(args.spec));
  if (!p.ok()) return Fail(p.status());
  // fp8 storage of the frozen base needs libtorch 2.1: refused before any input is read.
  if (p->base_precision == "fp8" && !kHasFp8) {
    return Fail(Status::Invalid(std::string("params.base_precision \"fp8\" needs a trainer built "
                                            "with libtorch 2.1 or newer (this one has ") +
                                TORCH_VERSION + ")"));
  }
  // The base model and the data (job_inputs.h): a UNet weights file and latents, or a diffusers
  // folder and photos encoded here (the encoding cached in --cache-dir, else the work dir).
  // Missing class images (class_images.h) are rendered first; a stop there exits at once (there
  // is no training to checkpoint yet, and every finished image is kept).
  Result<JobInputs> in = LoadJobInputs(
      args.spec, *p, args.cache_dir.empty() ? args.work_dir : args.cache_dir, StopRequested);
  if (!in.ok()) return Fail(in.status());
  if (in->class_images.stopped) return kExitInterrupted;
  // Rendering time is reported apart from training's (as sampling time is).
  if (in->class_images.rendered > 0) {
    EmitClassImages(in->class_images.rendered, in->class_images.seconds);
  }
  Result<std::unique_ptr<Trainer>> tr = Trainer::Create(
      in->config, in->denoiser_weights, std::move(in->data), *p, std::move(in->text),
      in->model ? in->model->scheduler_config : Json::object());
  if (!tr.ok()) return Fail(tr.status());
  in->denoiser_weights.clear();
  Trainer& t = **tr;
  if (!args.resume_dir.empty()) {
    Status s = t.Restore(args.resume_dir);
    if (!s.ok())
      return Fail(Status(s.code(), "resume from " + args.resume_dir + ": " + s.message()));
  }
  // A replay (--stop-at-step) trains to `end`, checkpoints there and renders no samples
  // (sampling draws from its own generator: skipping it leaves the training state as it is).
  const bool replay = args.stop_at_step > 0;
  const int64_t end = replay ? args.stop_at_step : p->steps;
  if (end > p->steps) return Fail(Status::Invalid("--stop-at-step is beyond the job's steps"));
  if (replay && t.step() >= end) {
    return Fail(Status::Invalid("resumed at or past --stop-at-step"));
  }
  Status s = MakeDirs(args.work_dir + "/checkpoints");
  if (!s.ok()) return Fail(s);
  // Samples (training/training_samples.h), rendered right after the checkpoint of a due step.
  Result<std::optional<JobSamples>> samples =
      JobSamplesFor(p->samples, in->model ? &*in->model : nullptr, t.denoiser());
  if (!samples.ok()) return Fail(samples.status());
  if (replay) *samples = std::nullopt;
  if (*samples && (*samples)->model.t5) {
    (*samples)->model.t5->max_sequence_length = p->max_sequence_length;
  }
  auto sample_due = [&] { return *samples && SampleDue(t.step(), p->steps, (*samples)->every); };
  using Clock = std::chrono::steady_clock;
  auto last_emit = Clock::now();
  auto render = [&]() -> int {  // kExitDone: go on
    const auto start = Clock::now();
    bool stopped = false;
    Status r = WriteTrainingSamples((*samples)->model, (*samples)->set, t.step(), args.work_dir,
                                    "lora-sd", job_id, StopRequested, &stopped);
    if (!r.ok()) return Fail(Status(r.code(), "samples: " + r.message()));
    last_emit += Clock::now() - start;  // sampling time is reported apart, not as training's
    return stopped ? kExitInterrupted : kExitDone;
  };
  // Resumed from a due step's checkpoint: its samples were perhaps never finished.
  if (!args.resume_dir.empty() && sample_due()) {
    if (int code = render(); code != kExitDone) return code;
  }

  std::map<std::string, std::string> exported;  // the last step's export, with its checkpoint
  auto checkpoint = [&]() -> Status {
    std::string dir = CheckpointDirFor(args.work_dir, t.step());
    GLEANER_RETURN_IF_ERROR(t.SaveCheckpoint(dir, job_id, &exported));
    EmitCheckpoint(t.step(), dir);
    return Status::Ok();
  };
  last_emit = Clock::now();
  int64_t samples_since = 0;
  const int64_t per_step = p->batch_size * p->gradient_accumulation;
  while (t.step() < end) {
    Result<double> loss = t.Step();
    if (!loss.ok()) return Fail(loss.status());
    samples_since += per_step;
    auto now = Clock::now();
    double dt = std::chrono::duration<double>(now - last_emit).count();
    if (dt >= 1.0 || t.step() == 1 || t.step() == p->steps ||
        (p->checkpoint_every > 0 && t.step() % p->checkpoint_every == 0)) {
      EmitStep(t.step(), p->steps, *loss, true, dt > 0 ? double(samples_since) / dt : 0);
      last_emit = now;
      samples_since = 0;
    }
    // The checkpoint of `end` always (the last step's records its export; a replay's is what
    // is compared), of due samples, of the schedule and of a stop.
    const bool sample_now = sample_due();
    if (sample_now || t.step() == end || StopRequested() ||
        (p->checkpoint_every > 0 && t.step() % p->checkpoint_every == 0)) {
      s = checkpoint();
      if (!s.ok()) return Fail(s);
      if (StopRequested() && t.step() < end) return kExitInterrupted;
    }
    if (sample_now) {
      if (int code = render(); code != kExitDone) return code;
    }
  }
  if (end < p->steps) return kExitDone;  // a replay: the checkpoint of `end` is written
  // The last step's checkpoint is durable: written above (with its export), or resumed from
  // (export it, and check it against the record).
  if (exported.empty()) {
    Result<std::map<std::string, std::string>> files = t.ExportFiles(job_id);
    if (!files.ok()) return Fail(files.status());
    s = CheckResumedExport(args.resume_dir, DescribeFiles(*files));
    if (!s.ok()) return Fail(Status(s.code(), "export: " + s.message()));
    exported = std::move(*files);
  }
  s = t.WriteOutput(OutputDirFor(args.work_dir), job_id, exported);
  if (!s.ok()) return Fail(s);
  EmitDone(t.step());
  return kExitDone;
}

}  // namespace

int RunLoraSd(const RunArgs& args) {
  int code = kExitFailed;
  Status s = CatchTorch("lora-sd", [&]() -> Status {
    code = Run(args);
    return Status::Ok();
  });
  if (!s.ok()) return Fail(s);
  return code;
}

}  // namespace gleaner::train
