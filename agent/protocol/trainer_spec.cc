#include "agent/protocol/trainer_spec.h"

#include <algorithm>

#include "shared/model_manifest.h"

namespace gleaner {
namespace {

constexpr const char* kPrefix = "spec.";

bool IsInputName(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '.';
    if (!ok) return false;
  }
  return true;
}

// A local path: not empty, at most kMaxSpecPathBytes, no NUL.
Status CheckPath(const std::string& path, const std::string& field) {
  if (path.empty()) return Status::Invalid(field + " must be a local path, not empty");
  if (path.size() > kMaxSpecPathBytes) {
    return Status::Invalid(field + " is longer than " + std::to_string(kMaxSpecPathBytes) +
                           " bytes");
  }
  if (path.find('\0') != std::string::npos) return Status::Invalid(field + " holds a NUL byte");
  return Status::Ok();
}

Status ReadInputs(const Json& inputs, std::vector<TrainerInput>* out) {
  for (auto it = inputs.begin(); it != inputs.end(); ++it) {
    const std::string field = std::string(kPrefix) + "inputs." + it.key();
    if (!IsInputName(it.key())) {
      return Status::Invalid(field + ": an input name is 1 to 64 of [A-Za-z0-9_.-]");
    }
    if (!it->is_string()) return Status::Invalid(field + " must be a string (a local path)");
    TrainerInput in;
    in.name = it.key();
    in.path = it->get<std::string>();
    GLEANER_RETURN_IF_ERROR(CheckPath(in.path, field));
    out->push_back(std::move(in));
  }
  // nlohmann's objects iterate in key order: the inputs come sorted and unique.
  return Status::Ok();
}

// "model": {"config"?, "format"?}; the format goes to the model input.
Status ReadModel(const Json& model, TrainerSpec* spec) {
  FieldReader r(model, std::string(kPrefix) + "model.");
  static const char* const kKeys[] = {"config", "format", nullptr};
  r.OnlyKeys(kKeys);
  std::string format;
  r.String("format", &format, false, 64);
  if (r.Has("config")) {
    const Json* config = nullptr;
    r.Object("config", &config, true);
    if (r.ok()) spec->model_config = *config;
  }
  if (!r.ok()) return r.status();
  if (model.contains("format") && !IsKnownModelFormat(format)) {
    return Status::Invalid(std::string(kPrefix) + "model.format '" + format +
                           "' is not a known model format (" + kModelFormatDiffusers + ", " +
                           kModelFormatUnetSafetensors + ")");
  }
  if (format.empty()) return Status::Ok();
  for (TrainerInput& in : spec->inputs) {
    if (in.name == "model") {
      in.format = format;
      return Status::Ok();
    }
  }
  return Status::Invalid(std::string(kPrefix) + "model.format is given but spec.inputs.model " +
                         "is not");
}

Status ReadResume(const Json& resume, TrainerSpec* spec) {
  FieldReader r(resume, std::string(kPrefix) + "resume.");
  static const char* const kKeys[] = {"dir", "step", nullptr};
  r.OnlyKeys(kKeys);
  r.String("dir", &spec->resume_dir, true, kMaxSpecPathBytes);
  r.Int("step", &spec->resume_step, true, 0, spec->steps);
  if (!r.ok()) return r.status();
  return CheckPath(spec->resume_dir, std::string(kPrefix) + "resume.dir");
}

}  // namespace

Result<TrainerSpec> TrainerSpec::Parse(std::string_view json) {
  if (json.size() > kMaxSpecBytes) {
    return Status::Invalid("spec is larger than " + std::to_string(kMaxSpecBytes) + " bytes");
  }
  Result<Json> parsed = ParseStrictJson(json);
  if (!parsed.ok()) return Status::Invalid("spec: " + parsed.status().message());
  const Json& j = *parsed;
  TrainerSpec spec;
  FieldReader r(j, kPrefix);
  static const char* const kKeys[] = {"job_id", "kind",  "params", "steps",        "epoch",
                                      "inputs", "model", "resume", "stop_at_step", nullptr};
  r.OnlyKeys(kKeys);
  r.String("job_id", &spec.job_id, false, 256);
  r.String("kind", &spec.kind, true, 64);
  const Json* params = nullptr;
  r.Object("params", &params, false);
  r.Int("steps", &spec.steps, false, 1, kMaxSpecSteps);
  r.Int("epoch", &spec.epoch, false, 0, INT64_MAX);
  const Json* inputs = nullptr;
  r.Object("inputs", &inputs, false);
  if (!r.ok()) return r.status();
  spec.params = *params;

  // steps: the top-level number, or params.steps when a spec written by hand has only that.
  FieldReader pr(spec.params, std::string(kPrefix) + "params.");
  int64_t params_steps = 0;
  pr.Int("steps", &params_steps, false, 1, kMaxSpecSteps);
  if (!pr.ok()) return pr.status();
  if (spec.steps == 0) spec.steps = params_steps;
  if (spec.steps == 0) {
    return Status::Invalid("spec.steps is required (or spec.params.steps, as the kind reads it)");
  }
  if (params_steps != 0 && params_steps != spec.steps) {
    return Status::Invalid("spec.params.steps (" + std::to_string(params_steps) +
                           ") differs from spec.steps (" + std::to_string(spec.steps) + ")");
  }

  GLEANER_RETURN_IF_ERROR(ReadInputs(*inputs, &spec.inputs));
  if (r.Has("model")) {
    const Json* model = nullptr;
    r.Object("model", &model, true);
    if (!r.ok()) return r.status();
    GLEANER_RETURN_IF_ERROR(ReadModel(*model, &spec));
  }
  if (r.Has("resume")) {
    const Json* resume = nullptr;
    r.Object("resume", &resume, true);
    if (!r.ok()) return r.status();
    GLEANER_RETURN_IF_ERROR(ReadResume(*resume, &spec));
  }
  if (r.Has("stop_at_step")) {
    r.Int("stop_at_step", &spec.stop_at_step, true, 1, spec.steps);
    if (!r.ok()) return r.status();
    if (!spec.resume_dir.empty() && spec.stop_at_step <= spec.resume_step) {
      return Status::Invalid("spec.stop_at_step (" + std::to_string(spec.stop_at_step) +
                             ") is not after spec.resume.step (" +
                             std::to_string(spec.resume_step) + ")");
    }
  }
  return spec;
}

Json TrainerSpec::ToJson() const {
  Json p = params.is_object() ? params : Json::object();
  p["steps"] = steps;  // the mirror of the one owner (see the header)
  Json j = {{"kind", kind}, {"params", std::move(p)}, {"steps", steps}};
  if (!job_id.empty()) j["job_id"] = job_id;
  if (epoch != 0) j["epoch"] = epoch;
  Json in = Json::object();
  Json model = Json::object();
  for (const TrainerInput& i : inputs) {
    in[i.name] = i.path;
    if (i.name == "model" && !i.format.empty()) model["format"] = i.format;
  }
  j["inputs"] = std::move(in);
  if (!model_config.is_null()) model["config"] = model_config;
  if (!model.empty()) j["model"] = std::move(model);
  if (!resume_dir.empty()) j["resume"] = {{"dir", resume_dir}, {"step", resume_step}};
  if (stop_at_step > 0) j["stop_at_step"] = stop_at_step;
  return j;
}

Status TrainerSpec::Validate() const {
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TrainerInput& in = inputs[i];
    for (size_t k = 0; k < i; ++k) {
      if (inputs[k].name == in.name) {
        return Status::Invalid("spec.inputs." + in.name + " is given twice");
      }
    }
    if (!in.format.empty() && in.name != "model") {
      return Status::Invalid("spec.inputs." + in.name + " has a format; only the model has one");
    }
    if (in.name == "model" && !in.format.empty() && !IsKnownModelFormat(in.format)) {
      return Status::Invalid("spec.model.format '" + in.format + "' is not a known model format");
    }
  }
  if (!params.is_object()) return Status::Invalid("spec.params must be an object");
  if (resume_dir.empty() && resume_step != 0) {
    return Status::Invalid("spec.resume.step is given without spec.resume.dir");
  }
  return Parse(DumpJson(ToJson())).status();
}

const TrainerInput* TrainerSpec::Input(std::string_view name) const {
  for (const TrainerInput& in : inputs) {
    if (in.name == name) return &in;
  }
  return nullptr;
}

std::string TrainerSpec::ModelFormat() const {
  const TrainerInput* model = Input("model");
  return model != nullptr ? model->format : "";
}

std::vector<std::string> TrainerSpec::CommandLine(const std::string& trainer,
                                                  const std::string& spec_path,
                                                  const std::string& work_dir,
                                                  const std::string& cache_dir) const {
  std::vector<std::string> argv = {trainer, "run", "--spec", spec_path, "--work-dir", work_dir};
  if (stop_at_step > 0) {
    argv.push_back("--stop-at-step");
    argv.push_back(std::to_string(stop_at_step));
  }
  if (!resume_dir.empty()) {
    argv.push_back("--resume");
    argv.push_back(resume_dir);
  }
  if (!cache_dir.empty()) {
    argv.push_back("--cache-dir");
    argv.push_back(cache_dir);
  }
  return argv;
}

}  // namespace gleaner
