// gleaner models (upload a diffusers folder once, reuse its manifest) and gleaner jobs submit
// (a folder of photos, a prompt and a model: archive, upload, submit).
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>

#include "coordinator/cli/cli.h"
#include "coordinator/cli/tar_writer.h"
#include "shared/model_manifest.h"

namespace gleaner::cli {
namespace {

bool IsDir(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// Regular files under root (symbolic links followed, as in a downloaded model snapshot), as
// sorted '/'-separated paths relative to root. Hidden entries (".git", ".DS_Store") are left
// out.
Failure ListFiles(const std::string& root, const std::string& rel, std::vector<std::string>* out) {
  std::string dir = rel.empty() ? root : root + "/" + rel;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return {kExitLocal, "cannot read the folder " + dir};
  std::vector<std::string> names;
  while (struct dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') names.push_back(e->d_name);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  for (const std::string& n : names) {
    std::string r = rel.empty() ? n : rel + "/" + n;
    struct stat st;
    if (stat((root + "/" + r).c_str(), &st) != 0) continue;  // a dangling link
    if (S_ISDIR(st.st_mode)) {
      Failure f = ListFiles(root, r, out);
      if (!f.ok()) return f;
    } else if (S_ISREG(st.st_mode)) {
      out->push_back(r);
    }
  }
  return {};
}

std::string Base(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

Failure ReadText(const std::string& path, std::string* text) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return {kExitLocal, "cannot read " + path};
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text->append(buf, n);
  std::fclose(f);
  return {};
}

Failure LoadManifest(const std::string& path, ModelManifest* m) {
  std::string text;
  Failure f = ReadText(path, &text);
  if (!f.ok()) return f;
  Result<ModelManifest> parsed = ParseModelManifest(text);
  if (!parsed.ok()) return {kExitLocal, path + ": " + parsed.status().message()};
  *m = std::move(parsed).value();
  return {};
}

// Hashes every file of a diffusers folder, checks the layout, then uploads each file that
// `reuse` (an earlier manifest of the same folder) does not already hold with the same sha256
// and size.
Failure UploadModelFolder(Api& api, const std::string& dir, const std::string& name,
                          const ModelManifest* reuse, ModelManifest* out) {
  std::vector<std::string> paths;
  Failure f = ListFiles(dir, "", &paths);
  if (!f.ok()) return f;
  out->name = name;
  out->files.clear();
  for (const std::string& p : paths) {
    ModelFile mf;
    mf.path = p;
    if (!IsValidModelPath(p)) return {kExitLocal, dir + "/" + p + ": unsupported file name"};
    Result<std::vector<ModelFile>> one = ParseModelFiles(
        Json::array(
            {{{"path", p}, {"url", "http://x"}, {"sha256", std::string(64, '0')}, {"size", 0}}}),
        "file");
    if (!one.ok()) {
      std::fprintf(stderr, "skipping %s (pickle weights are not accepted)\n", p.c_str());
      continue;
    }
    f = HashFile(dir + "/" + p, &mf.sha256, &mf.size);
    if (!f.ok()) return f;
    out->files.push_back(mf);
  }
  Status layout = CheckDiffusersLayout(out->files, false);
  if (!layout.ok()) return {kExitLocal, dir + ": " + layout.message()};
  for (ModelFile& mf : out->files) {
    if (reuse != nullptr) {
      for (const ModelFile& old : reuse->files) {
        if (old.path == mf.path && old.sha256 == mf.sha256 && old.size == mf.size &&
            !old.uri.empty()) {
          mf.uri = old.uri;
        }
      }
    }
    if (!mf.uri.empty()) continue;
    Json up;
    f = UploadFile(api, dir + "/" + mf.path, mf.path, &up);
    if (!f.ok()) return f;
    mf.uri = up.is_object() ? up.value("uri", "") : "";
  }
  return {};
}

int ModelsUpload(Api& api, const Args& a) {
  if (a.words.size() != 2 || !IsDir(a.words[1])) {
    return Report({kExitUsage, "usage: gleaner models upload DIR [--name NAME] [-o MANIFEST]"});
  }
  const std::string dir = a.words[1];
  const std::string name = a.Flag("name", Base(dir));
  const std::string out_path = a.Flag("o", name + ".model.json");
  ModelManifest old, m;
  bool have_old = access(out_path.c_str(), F_OK) == 0 && LoadManifest(out_path, &old).ok();
  Failure f = UploadModelFolder(api, dir, name, have_old ? &old : nullptr, &m);
  if (!f.ok()) return Report(f);
  std::string tmp = out_path + ".tmp";
  std::FILE* out = std::fopen(tmp.c_str(), "wb");
  std::string text = ModelManifestToJson(m) + "\n";
  bool ok = out != nullptr && std::fwrite(text.data(), 1, text.size(), out) == text.size();
  if (out != nullptr) ok = std::fclose(out) == 0 && ok;
  if (!ok || std::rename(tmp.c_str(), out_path.c_str()) != 0) {
    return Report({kExitLocal, "cannot write " + out_path});
  }
  if (a.Has("json")) {
    PrintJson(ParseJson(text).value());
  } else {
    std::printf("%s\n", out_path.c_str());
  }
  return kExitOk;
}

int ModelsCheck(const Args& a) {
  if (a.words.size() != 2) return Report({kExitUsage, "usage: gleaner models check MANIFEST"});
  ModelManifest m;
  Failure f = LoadManifest(a.words[1], &m);
  if (!f.ok()) return Report(f);
  int64_t bytes = 0;
  for (const ModelFile& mf : m.files) bytes += mf.size;
  std::printf("%s: %zu files, %lld bytes\n", a.words[1].c_str(), m.files.size(),
              static_cast<long long>(bytes));
  return kExitOk;
}

bool IsImageName(const std::string& path) {
  std::string lower = path;
  for (char& c : lower) c = char(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  for (const char* ext : {".jpg", ".jpeg", ".png", ".webp", ".txt"}) {
    size_t n = std::strlen(ext);
    if (lower.size() > n && lower.compare(lower.size() - n, n, ext) == 0) return true;
  }
  return false;
}

// Adds the images and captions under dir to the archive below prefix; returns the number of
// images.
Failure ArchiveImages(TarWriter* tar, const std::string& dir, const std::string& prefix,
                      int* images) {
  std::vector<std::string> paths;
  Failure f = ListFiles(dir, "", &paths);
  if (!f.ok()) return f;
  for (const std::string& p : paths) {
    if (!IsImageName(p)) {
      std::fprintf(stderr, "skipping %s/%s (not a JPEG, PNG, WebP or .txt caption)\n", dir.c_str(),
                   p.c_str());
      continue;
    }
    f = tar->Add(prefix + p, dir + "/" + p);
    if (!f.ok()) return f;
    if (p.size() < 4 || p.compare(p.size() - 4, 4, ".txt") != 0) ++*images;
  }
  return {};
}

const char kSubmitUsage[] =
    "usage: gleaner jobs submit --images DIR --instance-prompt TEXT --model MANIFEST|DIR "
    "[--train-text-encoder] [--class-images DIR --class-prompt TEXT] [--steps N] "
    "[--params JSON] [--wait]";

int JobsSubmit(Api& api, const Args& a) {
  if (a.words.size() != 1 || !a.Has("images") || !a.Has("instance-prompt") || !a.Has("model")) {
    return Report({kExitUsage, kSubmitUsage});
  }
  if (a.Has("class-images") != a.Has("class-prompt")) {
    return Report({kExitUsage, "--class-images and --class-prompt go together"});
  }
  const std::string images = a.Flag("images"), model = a.Flag("model");
  if (!IsDir(images)) return Report({kExitUsage, "--images " + images + " is not a folder"});
  if (a.Has("class-images") && !IsDir(a.Flag("class-images"))) {
    return Report({kExitUsage, "--class-images " + a.Flag("class-images") + " is not a folder"});
  }
  Json params = Json::object();
  if (a.Has("params")) {
    Result<Json> p = ParseJson(a.Flag("params"));
    if (!p.ok() || !p->is_object()) return Report({kExitUsage, "--params must be a JSON object"});
    params = *p;
  }
  char* end = nullptr;
  long long steps = std::strtoll(a.Flag("steps", "1000").c_str(), &end, 10);
  if (end == nullptr || *end != '\0' || steps < 1) {
    return Report({kExitUsage, "--steps must be a positive integer"});
  }
  if (a.Has("steps") || !params.contains("steps")) params["steps"] = int64_t(steps);
  params["instance_prompt"] = a.Flag("instance-prompt");
  if (a.Has("class-prompt")) params["class_prompt"] = a.Flag("class-prompt");
  if (a.Has("train-text-encoder")) params["train_text_encoder"] = true;

  // The model: a manifest from `gleaner models upload`, or a folder uploaded now.
  ModelManifest m;
  Failure f = IsDir(model) ? UploadModelFolder(api, model, Base(model), nullptr, &m)
                           : LoadManifest(model, &m);
  if (!f.ok()) return Report(f);

  // The dataset: instance images at the archive's root, class images under class/.
  const char* tmpdir = std::getenv("TMPDIR");
  std::string tmpl = std::string(tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : "/tmp") +
                     "/gleaner-dataset-XXXXXX";
  int fd = mkstemp(&tmpl[0]);
  if (fd < 0) return Report({kExitLocal, "cannot create a temporary file in " + tmpl});
  close(fd);
  const std::string archive = tmpl;
  struct Remove {
    std::string path;
    ~Remove() { unlink(path.c_str()); }
  } remove{archive};
  TarWriter tar(archive);
  int instance = 0, klass = 0;
  f = ArchiveImages(&tar, images, "", &instance);
  if (f.ok() && a.Has("class-images"))
    f = ArchiveImages(&tar, a.Flag("class-images"), "class/", &klass);
  if (f.ok()) f = tar.Finish();
  if (!f.ok()) return Report(f);
  if (instance == 0) return Report({kExitLocal, images + " holds no JPEG, PNG or WebP image"});
  if (a.Has("class-images") && klass == 0) {
    return Report({kExitLocal, a.Flag("class-images") + " holds no JPEG, PNG or WebP image"});
  }
  Json upload;
  f = UploadFile(api, archive, Base(images) + ".tar", &upload);
  if (!f.ok()) return Report(f);

  Json spec = {
      {"kind", "lora-sd"},
      {"params", params},
      {"model", {{"files", ModelFilesToJson(m.files)}}},
      {"dataset", {{"uri", upload.value("uri", "")}, {"sha256", upload.value("sha256", "")}}}};
  std::vector<std::pair<std::string, std::string>> headers;
  if (a.Has("idempotency-key")) headers.emplace_back("Idempotency-Key", a.Flag("idempotency-key"));
  Reply r;
  f = api.Call("POST", "/v1/jobs", &spec, &r, headers);
  if (!f.ok()) return Report(f);
  return PrintOrWaitJob(api, a, r.json);
}

}  // namespace

int CmdModels(Api& api, const Args& a) {
  std::string sub = a.words.empty() ? "" : a.words[0];
  if (sub == "upload") return ModelsUpload(api, a);
  if (sub == "check") return ModelsCheck(a);
  return Report({kExitUsage,
                 "usage: gleaner models upload DIR [--name NAME] [-o MANIFEST] | "
                 "gleaner models check MANIFEST"});
}

int CmdJobs(Api& api, const Args& a) {
  std::string sub = a.words.empty() ? "" : a.words[0];
  if (sub == "submit") return JobsSubmit(api, a);
  if (sub == "samples") return CmdJobsSamples(api, a);
  return Report(
      {kExitUsage, std::string(kSubmitUsage) + "\n       gleaner jobs samples ID [--out DIR]"});
}

}  // namespace gleaner::cli
