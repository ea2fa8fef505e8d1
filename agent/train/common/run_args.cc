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
  Result<std::string> text = files::ReadAll(args.spec_path, 16 << 20);
  if (!text.ok()) return Status::Invalid("cannot read spec: " + text.status().message());
  Result<Json> spec = ParseJson(*text);
  if (!spec.ok()) return Status::Invalid("spec " + args.spec_path + ": " + spec.status().message());
  FieldReader r(*spec, "spec.");
  std::string kind;
  r.String("kind", &kind, true, 64);
  const Json* unused = nullptr;
  r.Object("params", &unused, false);
  r.Object("inputs", &unused, false);
  if (!r.ok()) return Status::Invalid(r.status().message());
  args.spec = std::move(*spec);
  return args;
}

std::string SpecKind(const RunArgs& args) {
  auto it = args.spec.find("kind");
  return it != args.spec.end() && it->is_string() ? it->get<std::string>() : "";
}

std::string SpecJobId(const RunArgs& args) {
  auto it = args.spec.find("job_id");
  return it != args.spec.end() && it->is_string() ? it->get<std::string>() : "";
}

const Json& SpecParams(const RunArgs& args) {
  static const Json kEmpty = Json::object();
  auto it = args.spec.find("params");
  return it != args.spec.end() && it->is_object() ? *it : kEmpty;
}

std::string SpecInput(const RunArgs& args, const std::string& name) {
  auto it = args.spec.find("inputs");
  if (it == args.spec.end() || !it->is_object()) return "";
  auto in = it->find(name);
  return in != it->end() && in->is_string() ? in->get<std::string>() : "";
}

}  // namespace gleaner::train
