// Helpers for the tests that compare with reference sets and run gleaner-train: every set of a
// kind (vae-ref-a, vae-ref-b, ...), and the trainer binary run with its stderr captured.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "shared/trainer_protocol.h"
#include "train_test_util.h"  // Catch2, via the CHECK fix-up

namespace gleaner::train::testing {

// Every "<prefix>*" directory under the fixtures directory that holds `marker`, sorted.
inline std::vector<std::string> FixtureSets(const std::string& prefix, const std::string& marker) {
  std::vector<std::string> out;
  DIR* d = ::opendir(GLEANER_FIXTURES_DIR);
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name, dir = std::string(GLEANER_FIXTURES_DIR) + "/" + n;
    struct stat st;
    if (n.rfind(prefix, 0) == 0 && ::stat((dir + "/" + marker).c_str(), &st) == 0) {
      out.push_back(dir);
    }
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

#define FIXTURE_SETS(sets, prefix, marker)                                                \
  std::vector<std::string> sets = ::gleaner::train::testing::FixtureSets(prefix, marker); \
  if (sets.empty()) {                                                                     \
    GLEANER_SKIP("no " prefix "* reference set under " GLEANER_FIXTURES_DIR);             \
  }

inline Json MustJson(const std::string& path) {
  Result<std::string> t = ReadFile(path);
  REQUIRE(t.ok());
  Result<Json> j = ParseJson(*t);
  REQUIRE(j.ok());
  return *j;
}

// Every way to spoil one field of a JSON config: each key of `config` in turn replaced by a
// value of another type or out of range (what a hostile or broken model folder could hold).
inline std::vector<Json> SpoiledConfigs(const Json& config) {
  const Json odd[] = {nullptr,
                      true,
                      -1,
                      0,
                      1e300,
                      -1e300,
                      3.5,
                      "x",
                      Json::array(),
                      Json::array({1, "a", nullptr}),
                      Json::object(),
                      18446744073709551615ull};
  std::vector<Json> out;
  for (const auto& [key, value] : config.items()) {
    for (const Json& v : odd) {
      Json c = config;
      c[key] = v;
      out.push_back(c);
    }
  }
  return out;
}

struct CliResult {
  int code = -1;      // exit code, or -signal
  std::string error;  // everything written to stderr
};

// Runs gleaner-train with args (stdout discarded) and waits for it.
inline CliResult RunTrainCli(const std::vector<std::string>& args) {
  int err[2];
  REQUIRE(::pipe(err) == 0);
  std::string bin = std::string(GLEANER_BIN_DIR) + "/gleaner-train";
  pid_t pid = ::fork();
  if (pid == 0) {
    std::vector<char*> argv = {const_cast<char*>(bin.c_str())};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    int devnull = ::open("/dev/null", O_WRONLY);
    ::dup2(devnull, 1);
    ::dup2(err[1], 2);
    ::close(err[0]);
    ::execv(bin.c_str(), argv.data());
    ::_exit(127);
  }
  ::close(err[1]);
  CliResult r;
  char buf[4096];
  for (ssize_t n; (n = ::read(err[0], buf, sizeof buf)) > 0;) r.error.append(buf, size_t(n));
  ::close(err[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  return r;
}

// max |a - ref| and ||a - ref|| / ||ref|| within the given bounds (and the same shape).
inline void CheckClose(const std::string& what, const torch::Tensor& got, const torch::Tensor& ref,
                       double max_abs, double rel_l2) {
  INFO(what);
  REQUIRE(got.sizes() == ref.sizes());
  double mx = MaxAbs(got, ref), rel = RelL2(got, ref);
  WARN(what << ": max abs " << mx << ", rel-L2 " << rel);
  CHECK(mx <= max_abs);
  CHECK(rel <= rel_l2);
}

}  // namespace gleaner::train::testing
