// RunLoraSd: the lora-sd job kind behind the trainer contract (shared/trainer_protocol.h).
//
// SPEC.json: params (see TrainParams), inputs.model (weights: .safetensors or sharded
// .safetensors.index.json), inputs.dataset (see dataset.h), model.config (the diffusers UNet
// config object; or inputs.config, a path to config.json).
#include <signal.h>
#include <sys/prctl.h>

#include <chrono>
#include <csignal>
#include <cstdio>

#include "agent/train/kinds.h"
#include "agent/train/lora_sd/trainer.h"
#include "shared/trainer_protocol.h"

namespace gleaner::train {
namespace {

using namespace lora_sd;

volatile std::sig_atomic_t g_stop = 0;
void OnStopSignal(int) { g_stop = 1; }

void InstallSignals() {
  g_stop = 0;
  struct sigaction sa = {};
  sa.sa_handler = OnStopSignal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
}

void Emit(const ProgressEvent& e) {
  std::string line = FormatProgressEvent(e);
  std::fprintf(stdout, "%s\n", line.c_str());
  std::fflush(stdout);
}

int Fail(const Status& s) {
  ProgressEvent e;
  e.type = ProgressEvent::Type::kError;
  e.reason = s.message();
  Emit(e);
  std::fprintf(stderr, "lora-sd: %s\n", s.ToString().c_str());
  return kExitFailed;
}

std::string CheckpointDir(const std::string& work_dir, int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%010lld", static_cast<long long>(step));
  return work_dir + "/checkpoints/" + buf;
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
  std::string job_id = spec.value("job_id", std::string());
  int64_t spec_steps = 0;
  if (spec.contains("steps") && spec["steps"].is_number_integer()) {
    spec_steps = spec["steps"].get<int64_t>();
  }
  auto pit = spec.find("params");
  Json params = pit != spec.end() && pit->is_object() ? *pit : Json::object();
  Result<TrainParams> p = TrainParams::FromJson(params, spec_steps);
  if (!p.ok()) return Fail(p.status());
  Result<UNetConfig> cfg = SpecConfig(spec);
  if (!cfg.ok()) return Fail(cfg.status());
  Result<std::string> model = InputPath(spec, "model");
  if (!model.ok()) return Fail(model.status());
  Result<std::string> data_path = InputPath(spec, "dataset");
  if (!data_path.ok()) return Fail(data_path.status());
  Result<TensorMap> weights = LoadWeights(*model);
  if (!weights.ok()) return Fail(weights.status());
  Result<Dataset> data = LoadDataset(*data_path, cfg->in_channels, cfg->cross_attention_dim);
  if (!data.ok()) return Fail(data.status());
  Result<std::unique_ptr<Trainer>> tr = Trainer::Create(*cfg, *weights, std::move(*data), *p);
  if (!tr.ok()) return Fail(tr.status());
  weights->clear();
  Trainer& t = **tr;
  if (!args.resume_dir.empty()) {
    Status s = t.Restore(args.resume_dir);
    if (!s.ok()) return Fail(Status(s.code(), "resume from " + args.resume_dir + ": " + s.message()));
  }
  Status s = MakeDirs(args.work_dir + "/checkpoints");
  if (!s.ok()) return Fail(s);

  auto checkpoint = [&]() -> Status {
    std::string dir = CheckpointDir(args.work_dir, t.step());
    GLEANER_RETURN_IF_ERROR(t.SaveCheckpoint(dir, job_id));
    ProgressEvent e;
    e.type = ProgressEvent::Type::kCheckpoint;
    e.step = t.step();
    e.dir = dir;
    Emit(e);
    return Status::Ok();
  };
  using Clock = std::chrono::steady_clock;
  auto last_emit = Clock::now();
  int64_t samples_since = 0;
  const int64_t per_step = p->batch_size * p->gradient_accumulation;
  while (t.step() < p->steps) {
    if (g_stop) {
      s = checkpoint();
      if (!s.ok()) return Fail(s);
      return kExitInterrupted;
    }
    Result<double> loss = t.Step();
    if (!loss.ok()) return Fail(loss.status());
    samples_since += per_step;
    auto now = Clock::now();
    double dt = std::chrono::duration<double>(now - last_emit).count();
    if (dt >= 1.0 || t.step() == 1 || t.step() == p->steps ||
        (p->checkpoint_every > 0 && t.step() % p->checkpoint_every == 0)) {
      ProgressEvent e;
      e.step = t.step();
      e.steps = p->steps;
      e.loss = *loss;
      e.has_loss = true;
      e.samples_per_s = dt > 0 ? double(samples_since) / dt : 0;
      Emit(e);
      last_emit = now;
      samples_since = 0;
    }
    if (p->checkpoint_every > 0 && t.step() % p->checkpoint_every == 0 && t.step() < p->steps) {
      s = checkpoint();
      if (!s.ok()) return Fail(s);
    }
  }
  s = t.WriteOutput(args.work_dir + "/output", job_id);
  if (!s.ok()) return Fail(s);
  ProgressEvent done;
  done.type = ProgressEvent::Type::kDone;
  done.step = t.step();
  Emit(done);
  return kExitDone;
}

}  // namespace

int RunLoraSd(const RunArgs& args) {
  InstallSignals();
  int code = kExitFailed;
  Status s = CatchTorch("lora-sd", [&]() -> Status {
    code = Run(args);
    return Status::Ok();
  });
  if (!s.ok()) return Fail(s);
  return code;
}

}  // namespace gleaner::train
