// RunLoraSd: the lora-sd job kind behind the trainer contract (agent/protocol/trainer_protocol.h).
//
// SPEC.json: params (see LoraSdParams, shared/job_params.h), inputs.model (weights: .safetensors or
// sharded .safetensors.index.json), inputs.dataset (see dataset.h), model.config (the diffusers
// UNet config object; or inputs.config, a path to config.json).
#include <chrono>
#include <cstdio>

#include "agent/protocol/checkpoint_dir.h"
#include "agent/protocol/progress.h"
#include "agent/protocol/trainer_protocol.h"
#include "agent/train/common/run_args.h"
#include "agent/train/common/signals.h"
#include "agent/train/kinds.h"
#include "agent/train/lora_sd/trainer.h"
#include "agent/train/sampling/training_samples.h"

namespace gleaner::train {
namespace {

using namespace lora_sd;

int Fail(const Status& s) {
  EmitError(s.message());
  std::fprintf(stderr, "lora-sd: %s\n", s.ToString().c_str());
  return kExitFailed;
}

Result<std::string> InputPath(const Json& spec, const char* name) {
  auto in = spec.find("inputs");
  if (in == spec.end() || !in->is_object()) return Status::Invalid("spec.inputs is required");
  auto it = in->find(name);
  if (it == in->end() || !it->is_string() || it->get<std::string>().empty()) {
    return Status::Invalid(std::string("spec.inputs.") + name + " must be a local path");
  }
  return it->get<std::string>();
}

Result<UNetConfig> SpecConfig(const Json& spec) {
  auto model = spec.find("model");
  if (model != spec.end() && model->is_object() && model->contains("config")) {
    return ParseUNetConfig((*model)["config"]);
  }
  Result<std::string> path = InputPath(spec, "config");
  if (!path.ok()) return Status::Invalid("spec.model.config (the UNet config) is required");
  Result<std::string> text = ReadFile(*path);
  if (!text.ok()) return text.status();
  Result<Json> j = ParseJson(*text);
  if (!j.ok()) return Status::Invalid(*path + ": " + j.status().message());
  return ParseUNetConfig(*j);
}

int Run(const RunArgs& args) {
  const Json& spec = args.spec;
  std::string job_id = SpecJobId(args);
  int64_t spec_steps = 0;
  if (spec.contains("steps") && spec["steps"].is_number_integer()) {
    spec_steps = spec["steps"].get<int64_t>();
  }
  auto pit = spec.find("params");
  Json params = pit != spec.end() && pit->is_object() ? *pit : Json::object();
  if (!params.contains("steps") && spec_steps > 0) params["steps"] = spec_steps;
  // The coordinator stored normalised params; parsing them again is idempotent and keeps the
  // names, defaults and ranges in one place (shared/job_params.h).
  Result<LoraSdParams> p = LoraSdParams::Parse(params);
  if (!p.ok()) return Fail(p.status());
  Result<UNetConfig> cfg = SpecConfig(spec);
  if (!cfg.ok()) return Fail(cfg.status());
  Result<std::string> model = InputPath(spec, "model");
  if (!model.ok()) return Fail(model.status());
  Result<std::string> data_path = InputPath(spec, "dataset");
  if (!data_path.ok()) return Fail(data_path.status());
  // The dataset first: it is small, and a mismatch with the config fails before the weights load.
  Result<Dataset> data = LoadDataset(*data_path, *cfg);
  if (!data.ok()) return Fail(data.status());
  Result<TensorMap> weights = LoadWeights(*model);
  if (!weights.ok()) return Fail(weights.status());
  Result<std::unique_ptr<Trainer>> tr = Trainer::Create(*cfg, *weights, std::move(*data), *p);
  if (!tr.ok()) return Fail(tr.status());
  weights->clear();
  Trainer& t = **tr;
  if (!args.resume_dir.empty()) {
    Status s = t.Restore(args.resume_dir);
    if (!s.ok())
      return Fail(Status(s.code(), "resume from " + args.resume_dir + ": " + s.message()));
  }
  Status s = MakeDirs(args.work_dir + "/checkpoints");
  if (!s.ok()) return Fail(s);
  // Samples (sampling/training_samples.h), rendered right after the checkpoint of a due step.
  Result<std::optional<sampling::JobSamples>> samples =
      sampling::JobSamplesFor(p->samples, nullptr, t.unet());
  if (!samples.ok()) return Fail(samples.status());
  auto sample_due = [&] { return *samples && SampleDue(t.step(), p->steps, (*samples)->every); };
  auto render = [&]() -> int {  // kExitDone: go on
    bool stopped = false;
    Status r =
        sampling::WriteTrainingSamples((*samples)->model, (*samples)->set, t.step(), args.work_dir,
                                       "lora-sd", job_id, StopRequested, &stopped);
    if (!r.ok()) return Fail(Status(r.code(), "samples: " + r.message()));
    return stopped ? kExitInterrupted : kExitDone;
  };
  // Resumed from a due step's checkpoint: its samples were perhaps never finished.
  if (!args.resume_dir.empty() && sample_due()) {
    if (int code = render(); code != kExitDone) return code;
  }

  auto checkpoint = [&]() -> Status {
    std::string dir = CheckpointDirFor(args.work_dir, t.step());
    GLEANER_RETURN_IF_ERROR(t.SaveCheckpoint(dir, job_id));
    EmitCheckpoint(t.step(), dir);
    return Status::Ok();
  };
  using Clock = std::chrono::steady_clock;
  auto last_emit = Clock::now();
  int64_t samples_since = 0;
  const int64_t per_step = p->batch_size * p->gradient_accumulation;
  while (t.step() < p->steps) {
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
    const bool sample_now = sample_due();
    if (sample_now ||
        (t.step() < p->steps &&
         (StopRequested() || (p->checkpoint_every > 0 && t.step() % p->checkpoint_every == 0)))) {
      s = checkpoint();
      if (!s.ok()) return Fail(s);
      if (StopRequested()) return kExitInterrupted;
    }
    if (sample_now) {
      if (int code = render(); code != kExitDone) return code;
    }
  }
  s = t.WriteOutput(OutputDirFor(args.work_dir), job_id);
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
