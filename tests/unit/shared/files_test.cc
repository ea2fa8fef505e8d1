// shared/native/files.h: the native programs' one set of file helpers, on the real disk.
#include "shared/native/files.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <string>

using namespace gleaner;

namespace {

struct TempDir {
  TempDir() {
    char tmpl[] = "/tmp/gleaner-files-XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~TempDir() { files::RemoveTree(path); }
  std::string path;
};

}  // namespace

TEST_CASE("paths: Join and Dirname", "[files]") {
  CHECK(files::Join("a/b", "c") == "a/b/c");
  CHECK(files::Join("a/b/", "c") == "a/b/c");
  CHECK(files::Join("", "c") == "c");
  CHECK(files::Dirname("a/b/c") == "a/b");
  CHECK(files::Dirname("c") == ".");
  CHECK(files::Dirname("/c") == "/");
}

TEST_CASE("WriteDurable: the old bytes or the new ones, never a mix, no temp file left",
          "[files]") {
  TempDir t;
  const std::string path = files::Join(t.path, "state.json");
  REQUIRE(files::WriteDurable(path, "{\"v\":1}", 0600).ok());
  REQUIRE(files::WriteDurable(path, "{\"v\":2,\"longer\":true}", 0600).ok());
  CHECK(*files::ReadAll(path) == "{\"v\":2,\"longer\":true}");
  struct stat st;
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  CHECK(*files::ListDir(t.path) == std::vector<std::string>{"state.json"});

  // The rename fails (a non-empty directory is in the way): nothing changes, the temp file goes.
  const std::string blocked = files::Join(t.path, "blocked");
  REQUIRE(files::MakeDirs(files::Join(blocked, "inside")).ok());
  CHECK_FALSE(files::WriteDurable(blocked, "new").ok());
  CHECK(files::IsDir(files::Join(blocked, "inside")));
  CHECK_FALSE(files::Exists(blocked + ".tmp"));

  // The temp file cannot be made: the old bytes stay.
  REQUIRE(files::MakeDirs(path + ".tmp").ok());
  CHECK_FALSE(files::WriteDurable(path, "{\"v\":3}").ok());
  CHECK(*files::ReadAll(path) == "{\"v\":2,\"longer\":true}");
}

TEST_CASE("ReadAll: missing is kNotFound, over the limit is kTooLarge", "[files]") {
  TempDir t;
  const std::string path = files::Join(t.path, "f");
  CHECK(files::ReadAll(path).status().code() == Code::kNotFound);
  REQUIRE(files::WriteDurable(path, std::string(100, 'x')).ok());
  CHECK(files::ReadAll(path, 100).ok());
  CHECK(files::ReadAll(path, 99).status().code() == Code::kTooLarge);
  Result<files::FileDigest> d = files::Digest(path);
  REQUIRE(d.ok());
  CHECK(d->size == 100);
}
