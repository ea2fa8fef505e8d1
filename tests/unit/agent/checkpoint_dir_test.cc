#include "agent/protocol/checkpoint_dir.h"

#include <catch2/catch.hpp>

#include "shared/native/files.h"
#include "test_util.h"

using namespace gleaner;
using gleaner::testing::TempDir;

TEST_CASE("a committed checkpoint directory verifies, the temp directory is gone", "[ckpt]") {
  TempDir t;
  std::string dir = train::CheckpointDirFor(t.path(), 42);
  CHECK(dir == t / "checkpoints/0000000042");
  auto w = train::CheckpointWriter::Begin(dir);
  REQUIRE(w.ok());
  REQUIRE(w->AddFile("a.bin", "hello").ok());
  REQUIRE(files::WriteSynced(files::Join(w->tmp_dir(), "b.bin"), std::string(100000, 'x')).ok());
  REQUIRE(w->AddWrittenFile("b.bin").ok());
  CHECK_FALSE(w->AddFile("a.bin", "again").ok());
  CHECK_FALSE(w->AddFile("../escape", "x").ok());
  CHECK_FALSE(files::Exists(dir));  // not published before Commit
  REQUIRE(w->Commit("synthetic", "job-1", 42, Json{{"k", 1}}).ok());
  CHECK_FALSE(files::Exists(dir + ".tmp"));
  auto m = train::VerifyCheckpointDir(dir);
  INFO(m.status().ToString());
  REQUIRE(m.ok());
  CHECK(m->step == 42);
  CHECK(m->kind == "synthetic");
  CHECK(m->files.size() == 2);
  CHECK(m->meta["k"] == 1);
  CHECK(train::LatestCheckpointDir(t.path()) == dir);
}

TEST_CASE("verification catches changed, truncated and missing files", "[ckpt]") {
  TempDir t;
  std::string dir = train::CheckpointDirFor(t.path(), 1);
  auto w = train::CheckpointWriter::Begin(dir);
  REQUIRE(w.ok());
  REQUIRE(w->AddFile("state", "0123456789").ok());
  REQUIRE(w->Commit("synthetic", "j", 1).ok());
  SECTION("flipped byte") {
    REQUIRE(files::WriteSynced(dir + "/state", "0123456788").ok());
    auto m = train::VerifyCheckpointDir(dir);
    CHECK(m.status().code() == Code::kCorruption);
  }
  SECTION("truncated") {
    REQUIRE(files::WriteSynced(dir + "/state", "01234").ok());
    CHECK(train::VerifyCheckpointDir(dir).status().code() == Code::kCorruption);
  }
  SECTION("missing file") {
    REQUIRE(files::RemoveTree(dir + "/state").ok());
    CHECK(train::VerifyCheckpointDir(dir).status().code() == Code::kCorruption);
  }
  SECTION("missing manifest: not a checkpoint") {
    REQUIRE(files::RemoveTree(dir + "/MANIFEST.json").ok());
    CHECK(train::VerifyCheckpointDir(dir).status().code() == Code::kNotFound);
    CHECK(train::LatestCheckpointDir(t.path()).empty());
  }
  SECTION("garbage manifest") {
    REQUIRE(files::WriteSynced(dir + "/MANIFEST.json", "{\"format\":1").ok());
    CHECK(train::VerifyCheckpointDir(dir).status().code() == Code::kCorruption);
  }
}

TEST_CASE("a stale temp directory from a crash is replaced, and a step can be rewritten",
          "[ckpt]") {
  TempDir t;
  std::string dir = train::CheckpointDirFor(t.path(), 5);
  REQUIRE(files::MakeDirs(dir + ".tmp").ok());
  REQUIRE(files::WriteSynced(dir + ".tmp/junk", "x").ok());
  for (int round = 0; round < 2; ++round) {
    auto w = train::CheckpointWriter::Begin(dir);
    REQUIRE(w.ok());
    REQUIRE(w->AddFile("s", std::to_string(round)).ok());
    REQUIRE(w->Commit("synthetic", "j", 5).ok());
  }
  CHECK_FALSE(files::Exists(dir + "/junk"));
  CHECK(*files::ReadAll(dir + "/s") == "1");
}
