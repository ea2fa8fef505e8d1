// Helpers for lora-sd tests: fixture access, scratch directories, tensor comparisons, specs.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "agent/train/denoiser/denoiser_lora.h"
#include "agent/train/jobs/kinds.h"
#include "agent/train/models/unet/unet.h"
#include "agent/train/models/unet/unet_config.h"
#include "agent/train/nn/torch_io.h"
#include "agent/train/training/dataset.h"
#include "shared/json.h"

// glog (pulled in by libtorch) defines CHECK(cond) too. Catch's must win: lora-sd test files get
// Catch only through this header, which includes libtorch first and then replaces CHECK.
#undef CHECK
#include <catch2/catch.hpp>

#include "tests/skip.h"

namespace gleaner::train::testing {

using namespace gleaner::train;
using namespace gleaner::train::unet;
using namespace gleaner::train::training;

// A reference fixture directory (default: the SD one), or "" (the test then skips).
inline std::string FixtureDir(const std::string& name = "unet-ref-a") {
  std::string d = std::string(GLEANER_FIXTURES_DIR) + "/" + name;
  struct stat st;
  return ::stat((d + "/weights.safetensors").c_str(), &st) == 0 ? d : "";
}

// The SDXL fixture sets present: "sdxl-unet-ref-a" (required; the caller skips without it) and
// any companion set ("sdxl-unet-ref-b", another config), each checked by the same rules.
inline std::vector<std::string> SdxlFixtureDirs() {
  std::vector<std::string> out;
  for (const char* name : {"sdxl-unet-ref-a", "sdxl-unet-ref-b"}) {
    std::string d = FixtureDir(name);
    if (!d.empty()) out.push_back(d);
  }
  return out;
}

#define SKIP_WITHOUT_SDXL_FIXTURES(dirs)                                               \
  std::vector<std::string> dirs = ::gleaner::train::testing::SdxlFixtureDirs();        \
  if (::gleaner::train::testing::FixtureDir("sdxl-unet-ref-a").empty()) {              \
    GLEANER_SKIP("fixtures not found under " GLEANER_FIXTURES_DIR "/sdxl-unet-ref-a"); \
  }

#define SKIP_WITHOUT_FIXTURE(dir)                                                 \
  std::string dir = ::gleaner::train::testing::FixtureDir();                      \
  if (dir.empty()) {                                                              \
    GLEANER_SKIP("fixtures not found under " GLEANER_FIXTURES_DIR "/unet-ref-a"); \
  }

inline void RemoveTree(const std::string& path) {
  DIR* d = ::opendir(path.c_str());
  if (d != nullptr) {
    while (dirent* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n != "." && n != "..") RemoveTree(path + "/" + n);
    }
    ::closedir(d);
    ::rmdir(path.c_str());
  } else {
    ::unlink(path.c_str());
  }
}

class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string t = std::string(base ? base : "/tmp") + "/gleaner-train-test-XXXXXX";
    std::vector<char> buf(t.begin(), t.end());
    buf.push_back('\0');
    path_ = ::mkdtemp(buf.data());
  }
  ~TempDir() { RemoveTree(path_); }
  std::string operator/(const std::string& n) const { return path_ + "/" + n; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline double RelL2(const torch::Tensor& a, const torch::Tensor& ref) {
  return ((a.to(torch::kFloat64) - ref.to(torch::kFloat64)).norm() / ref.to(torch::kFloat64).norm())
      .item<double>();
}
inline double MaxAbs(const torch::Tensor& a, const torch::Tensor& ref) {
  return (a.to(torch::kFloat64) - ref.to(torch::kFloat64)).abs().max().item<double>();
}

inline TensorMap MustLoad(const std::string& path) {
  Result<TensorMap> r = LoadSafetensors(path);
  if (!r.ok()) FAIL(r.status().ToString());
  return *r;
}

inline TensorMap MustLoad(const std::string& path, std::map<std::string, std::string>* meta) {
  Result<TensorMap> r = LoadSafetensors(path, meta);
  if (!r.ok()) FAIL(r.status().ToString());
  return *r;
}

// `got` has exactly the keys of `ref`, each with the same shape.
inline void CheckSameKeysAndShapes(const TensorMap& got, const TensorMap& ref) {
  REQUIRE(got.size() == ref.size());
  for (const auto& [k, v] : ref) {
    INFO(k);
    REQUIRE(got.count(k));
    CHECK(got.at(k).sizes() == v.sizes());
  }
}

inline UNetConfig MustConfig(const std::string& path) {
  Result<std::string> t = ReadFile(path);
  REQUIRE(t.ok());
  Result<Json> j = ParseJson(*t);
  REQUIRE(j.ok());
  Result<UNetConfig> c = ParseUNetConfig(*j);
  REQUIRE(c.ok());
  return *c;
}

inline std::string Bytes(const std::string& path) {
  Result<std::string> r = ReadFile(path);
  REQUIRE(r.ok());
  return *r;
}

// A spec as gleaner-train reads it (agent/protocol/trainer_spec.h).
inline TrainerSpec MustSpec(const Json& spec) {
  Result<TrainerSpec> s = TrainerSpec::Parse(DumpJson(spec));
  INFO(s.status().ToString());
  REQUIRE(s.ok());
  return *s;
}

// A tiny model (SD-style, or SDXL-style with text_time), its weights and a make-dataset dataset
// in a scratch directory, and a spec for them.
struct TinyJob {
  TempDir tmp;
  UNetConfig config;
  explicit TinyJob(int64_t n = 8, bool prior = false, bool sdxl = false)
      : config(sdxl ? TinySdxlConfig() : TinyConfig()) {
    REQUIRE(SaveSafetensors(tmp / "weights.safetensors", RandomWeights(config, 1)).ok());
    MakeDatasetOptions o;
    o.n = n;
    o.size = 8;
    o.tokens = 4;
    o.dim = config.cross_attention_dim;
    o.pooled = config.pooled_dim();
    o.seed = 7;
    o.prior = prior;
    Result<std::string> d = MakeDataset(o);
    REQUIRE(d.ok());
    REQUIRE(WriteFileDurable(tmp / "data.safetensors", *d).ok());
  }
  Json Spec(Json params) const {
    return Json{
        {"job_id", "job-1"},
        {"kind", "lora-sd"},
        {"params", std::move(params)},
        {"inputs", {{"model", tmp / "weights.safetensors"}, {"dataset", tmp / "data.safetensors"}}},
        {"model", {{"config", UNetConfigToJson(config)}}}};
  }
  int Run(const Json& spec, const std::string& work, const std::string& resume = "") const {
    RunArgs a;
    a.spec = MustSpec(spec);
    a.work_dir = work;
    a.resume_dir = resume;
    return RunLoraSd(a);
  }
};

// Runs the gleaner-train binary (stdout to /dev/null, stderr to `err` if given); returns its
// exit code (-signal if killed).
inline int RunBin(const std::vector<std::string>& args, const std::string& err = "") {
  pid_t pid = ::fork();
  if (pid == 0) {
    std::vector<char*> argv;
    std::string bin = std::string(GLEANER_BIN_DIR) + "/gleaner-train";
    argv.push_back(const_cast<char*>(bin.c_str()));
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    int devnull = ::open("/dev/null", O_WRONLY);
    ::dup2(devnull, 1);
    if (!err.empty()) {
      int fd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(fd, 2);
    }
    ::execv(bin.c_str(), argv.data());
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

// Runs `gleaner-train forward` on fixture set `dir` with LoRA file `lora` (the set's inputs as
// inputs and as gradient weights R) writing `out`, and checks the output and every LoRA gradient
// against the set's references.
inline void CheckForwardCli(const std::string& dir, const std::string& lora,
                            const std::string& out) {
  REQUIRE(RunBin({"forward", "--config", dir + "/config.json", "--weights",
                  dir + "/weights.safetensors", "--inputs", dir + "/inputs.safetensors", "--lora",
                  lora, "--grad-weights", dir + "/inputs.safetensors", "--out", out}) == 0);
  TensorMap o = MustLoad(out);
  CHECK(RelL2(o.at("sample"), MustLoad(dir + "/lora/output.safetensors").at("sample")) <= 1e-5);
  for (const auto& [k, v] : MustLoad(dir + "/lora/grad.safetensors")) {
    INFO(k);
    REQUIRE(o.count(k));
    CHECK(RelL2(o.at(k), v) <= 1e-4);
  }
}

// Every file under `dir` (relative paths), for "changed nothing" checks.
inline std::vector<std::string> FilesUnder(const std::string& dir, const std::string& rel = "") {
  std::vector<std::string> out;
  DIR* d = ::opendir((dir + rel).c_str());
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n == "." || n == "..") continue;
    std::vector<std::string> sub = FilesUnder(dir, rel + "/" + n);
    if (sub.empty()) out.push_back(rel + "/" + n);
    out.insert(out.end(), sub.begin(), sub.end());
  }
  ::closedir(d);
  return out;
}

}  // namespace gleaner::train::testing
