// Helpers for lora-sd tests: fixture access, scratch directories, tensor comparisons, specs.
#pragma once

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "agent/train/lora_sd/unet_config.h"
#include "agent/train/nn/torch_io.h"
#include "shared/json.h"

// glog (pulled in by libtorch) defines CHECK(cond) too. Catch's must win: lora-sd test files get
// Catch only through this header, which includes libtorch first and then replaces CHECK.
#undef CHECK
#include <catch2/catch.hpp>

#include "tests/skip.h"

namespace gleaner::train::testing {

using namespace gleaner::train;
using namespace gleaner::train::lora_sd;

// The reference fixture directory, or "" (the test then skips with a message).
inline std::string FixtureDir() {
  std::string d = std::string(GLEANER_FIXTURES_DIR) + "/unet-ref-a";
  struct stat st;
  return ::stat((d + "/weights.safetensors").c_str(), &st) == 0 ? d : "";
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

inline UNetConfig MustConfig(const std::string& path) {
  Result<std::string> t = ReadFile(path);
  REQUIRE(t.ok());
  Result<Json> j = ParseJson(*t);
  REQUIRE(j.ok());
  Result<UNetConfig> c = ParseUNetConfig(*j);
  REQUIRE(c.ok());
  return *c;
}

}  // namespace gleaner::train::testing
