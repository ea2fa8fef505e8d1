#include "agent/train/common/run_args.h"

#include <cstdlib>
#include <cstring>

#include "shared/native/files.h"

namespace gleaner::train {

Result<RunArgs> ParseRunArgs(int argc, char** argv) {
  RunArgs args;
  std::string stop_at;
  for (int i = 0; i < argc; ++i) {
    const char* flag = argv[i];
    std::string* target = nullptr;
    if (std::strcmp(flag, "--spec") == 0) {
      target = &args.spec_path;
    } else if (std::strcmp(flag, "--work-dir") == 0) {
      target = &args.work_dir;
    } else if (std::strcmp(flag, "--resume") == 0) {
      target = &args.resume_dir;
    } else if (std::strcmp(flag, "--cache-dir") == 0) {
      target = &args.cache_dir;
    } else if (std::strcmp(flag, "--stop-at-step") == 0) {
      target = &stop_at;
    } else {
      return Status::Invalid(std::string("unknown argument '") + flag + "'");
    }
    if (i + 1 >= argc || argv[i + 1][0] == '\0') {
      return Status::Invalid(std::string(flag) + " needs a value");
    }
    *target = argv[++i];
  }
  if (args.spec_path.empty()) return Status::Invalid("--spec FILE is required");
  if (args.work_dir.empty()) return Status::Invalid("--work-dir DIR is required");
  if (!stop_at.empty()) {
    bool digits = stop_at.size() <= 9;
    for (char c : stop_at) digits = digits && c >= '0' && c <= '9';
    if (digits) args.stop_at_step = std::atoll(stop_at.c_str());
    if (!digits || args.stop_at_step < 1) {
      return Status::Invalid("--stop-at-step must be a step number >= 1");
    }
  }
  Result<std::string> text = files::ReadAll(args.spec_path, kMaxSpecBytes);
  if (!text.ok()) return Status::Invalid("cannot read spec: " + text.status().message());
  Result<TrainerSpec> spec = TrainerSpec::Parse(*text);
  if (!spec.ok()) return Status::Invalid(args.spec_path + ": " + spec.status().message());
  args.spec = std::move(*spec);
  // The flags and the spec say the same (either alone is enough).
  if (!args.spec.resume_dir.empty()) {
    if (!args.resume_dir.empty() && args.resume_dir != args.spec.resume_dir) {
      return Status::Invalid("--resume " + args.resume_dir + " differs from spec.resume.dir " +
                             args.spec.resume_dir);
    }
    args.resume_dir = args.spec.resume_dir;
  }
  if (args.spec.stop_at_step > 0) {
    if (args.stop_at_step > 0 && args.stop_at_step != args.spec.stop_at_step) {
      return Status::Invalid("--stop-at-step " + std::to_string(args.stop_at_step) +
                             " differs from spec.stop_at_step " +
                             std::to_string(args.spec.stop_at_step));
    }
    args.stop_at_step = args.spec.stop_at_step;
  }
  return args;
}

Json KindParams(const RunArgs& args) {
  Json params = args.spec.params.is_object() ? args.spec.params : Json::object();
  params["steps"] = args.spec.steps;
  return params;
}

}  // namespace gleaner::train
