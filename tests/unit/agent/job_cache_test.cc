// Per-job caches (job_cache.h): opened 0700 and marked used, pruned by age, odd entries removed
// without following them.
#include "agent/supervisor/job_cache.h"

#include <sys/stat.h>
#include <unistd.h>
#include <utime.h>

#include <catch2/catch.hpp>
#include <ctime>

#include "agent/supervisor/state.h"
#include "shared/native/files.h"
#include "test_util.h"

using namespace gleaner;
using namespace gleaner::agent;
using gleaner::testing::TempDir;

namespace {

void SetMtime(const std::string& path, int64_t t) {
  struct utimbuf times = {time_t(t), time_t(t)};
  REQUIRE(::utime(path.c_str(), &times) == 0);
}

int64_t Mtime(const std::string& path) {
  struct stat st;
  REQUIRE(::lstat(path.c_str(), &st) == 0);
  return st.st_mtime;
}

}  // namespace

TEST_CASE("a job cache is opened 0700 and marked used at every lease", "[job_cache]") {
  TempDir tmp;
  StateDir state(tmp / "state");
  REQUIRE(state.Init().ok());
  const std::string dir = state.JobCacheDir("job/../x");
  CHECK(dir == tmp / "state/job-cache/job____x");
  CHECK(state.JobCacheDir("") == tmp / "state/job-cache/_");
  REQUIRE(OpenJobCache(dir).ok());
  struct stat st;
  REQUIRE(::stat(dir.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);
  // What the trainer kept survives the next lease; the directory is marked used again.
  REQUIRE(files::WriteDurable(dir + "/encoded-dataset.safetensors", "x").ok());
  SetMtime(dir, 1000);
  REQUIRE(OpenJobCache(dir).ok());
  CHECK(Mtime(dir) > time(nullptr) - 60);
  CHECK(files::Exists(dir + "/encoded-dataset.safetensors"));
  // A file where the directory should be is replaced.
  REQUIRE(files::RemoveTree(dir).ok());
  REQUIRE(files::WriteDurable(dir, "stray").ok());
  REQUIRE(OpenJobCache(dir).ok());
  CHECK(files::IsDir(dir));
}

TEST_CASE("job caches unused for longer than the limit are pruned and odd entries go too",
          "[job_cache]") {
  TempDir tmp;
  const std::string root = tmp / "job-cache", outside = tmp / "outside";
  const int64_t now = 1'700'000'000, day = 24 * 3600;
  REQUIRE(files::MakeDirs(root + "/old/sub").ok());
  REQUIRE(files::WriteDurable(root + "/old/sub/f", "x").ok());
  REQUIRE(files::MakeDirs(root + "/fresh").ok());
  REQUIRE(files::WriteDurable(root + "/stray-file", "x").ok());
  REQUIRE(files::MakeDirs(outside).ok());
  REQUIRE(files::WriteDurable(outside + "/keep", "x").ok());
  REQUIRE(::symlink(outside.c_str(), (root + "/link").c_str()) == 0);
  SetMtime(root + "/old", now - kJobCacheMaxIdleS - day);
  SetMtime(root + "/fresh", now - kJobCacheMaxIdleS + day);

  CHECK(PruneJobCaches(root, now) == 3);
  CHECK_FALSE(files::Exists(root + "/old"));
  CHECK_FALSE(files::Exists(root + "/stray-file"));
  struct stat st;
  CHECK(::lstat((root + "/link").c_str(), &st) != 0);
  CHECK(files::Exists(outside + "/keep"));  // the link was removed, not followed
  CHECK(files::IsDir(root + "/fresh"));
  // Nothing left to prune; a missing root is no error.
  CHECK(PruneJobCaches(root, now) == 0);
  CHECK(PruneJobCaches(tmp / "missing", now) == 0);
}
