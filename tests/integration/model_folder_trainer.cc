// A stand-in for gleaner-train in model-folder tests: it follows the trainer protocol
// (agent/protocol/trainer_protocol.h) and, instead of training, lists what the agent gave it.
// Output "inputs.txt": one line "<sha256>  <path>" per file of the model folder (sorted), then
// "dataset <sha256> <size>", "format <SPEC model.format>", and the dataset as the trainer's own
// reader (agent/train/images/dataset.h) sees it: "instance <path> <caption>" and "class <path>
// <caption>" per image. Exit 2 when the model input is not a directory or the dataset is
// refused.
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "agent/protocol/checkpoint_dir.h"
#include "agent/protocol/trainer_protocol.h"
#include "agent/train/images/dataset.h"
#include "shared/native/files.h"

using namespace gleaner;

namespace {

void List(const std::string& root, const std::string& rel, std::vector<std::string>* out) {
  std::string dir = rel.empty() ? root : root + "/" + rel;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return;
  while (struct dirent* e = readdir(d)) {
    std::string n = e->d_name;
    if (n == "." || n == "..") continue;
    std::string r = rel.empty() ? n : rel + "/" + n;
    struct stat st;
    if (stat((root + "/" + r).c_str(), &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      List(root, r, out);
    } else {
      out->push_back(r);
    }
  }
  closedir(d);
}

int Fail(const std::string& why) {
  std::fprintf(stderr, "%s\n", why.c_str());
  return kExitFailed;
}

}  // namespace

int main(int argc, char** argv) {
  std::string spec_path, work_dir;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--spec") spec_path = argv[i + 1];
    if (std::string(argv[i]) == "--work-dir") work_dir = argv[i + 1];
  }
  if (spec_path.empty() || work_dir.empty()) return kExitUsage;
  Result<std::string> text = files::ReadAll(spec_path);
  if (!text.ok()) return Fail(text.status().ToString());
  Result<Json> spec = ParseJson(*text);
  if (!spec.ok() || !spec->is_object()) return Fail("bad SPEC");
  const Json& inputs = (*spec)["inputs"];
  std::string model = inputs.value("model", ""), dataset = inputs.value("dataset", "");
  if (!files::IsDir(model)) return Fail("model input is not a directory: " + model);
  std::vector<std::string> paths;
  List(model, "", &paths);
  std::sort(paths.begin(), paths.end());
  std::string out;
  for (const std::string& p : paths) {
    Result<files::FileDigest> d = files::Digest(model + "/" + p);
    if (!d.ok()) return Fail(d.status().ToString());
    out += d->sha256 + "  " + p + "\n";
  }
  Result<files::FileDigest> d = files::Digest(dataset);
  if (!d.ok()) return Fail("dataset: " + d.status().ToString());
  out += "dataset " + d->sha256 + " " + std::to_string(d->size) + "\n";
  std::string format = (*spec).contains("model") ? (*spec)["model"].value("format", "") : "";
  out += "format " + format + "\n";
  images::DatasetOptions options;
  const Json& params = (*spec)["params"];
  options.instance_prompt = params.value("instance_prompt", "");
  options.class_prompt = params.value("class_prompt", "");
  Result<images::Dataset> ds = images::Dataset::Open(dataset, options);
  if (!ds.ok()) return Fail(ds.status().ToString());
  for (const images::DatasetImage& im : ds->instance_images()) {
    out += "instance " + im.path + " " + im.caption + "\n";
  }
  for (const images::DatasetImage& im : ds->class_images()) {
    out += "class " + im.path + " " + im.caption + "\n";
  }
  const int64_t steps = spec->value("steps", int64_t(1));
  Result<train::CheckpointWriter> w = train::CheckpointWriter::Begin(train::OutputDirFor(work_dir));
  if (!w.ok()) return Fail(w.status().ToString());
  Status s = w->AddFile("inputs.txt", out);
  if (s.ok()) s = w->Commit(spec->value("kind", ""), spec->value("job_id", ""), steps);
  if (!s.ok()) return Fail(s.ToString());
  ProgressEvent done;
  done.type = ProgressEvent::Type::kDone;
  done.step = steps;
  std::printf("%s\n", FormatProgressEvent(done).c_str());
  return kExitDone;
}
