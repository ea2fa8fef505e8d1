#include "coordinator/native/blob/blob_store.h"

#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "shared/sha256.h"
#include "tests/unit/native/blob_test_util.h"
#include "tests/unit/native/fault_fs.h"

using namespace gleaner;
using namespace gleaner::native;
using gleaner::native::testing::CountEntries;
using gleaner::native::testing::FaultFs;
using gleaner::native::testing::ReadBlob;
using gleaner::native::testing::TempDir;

TEST_CASE("keys are validated so nothing leaves the root", "[blob_store]") {
  for (const char* good : {"a", "jobs/j_1/ckpt/e2/s000100", "uploads/u_1/data.bin", "a-b_c.d/e"}) {
    CHECK(BlobStore::ValidKey(good));
  }
  for (const char* bad : {"", "/abs", "a//b", "a/", "../x", "a/../b", "./a", "a/.", ".tmp/x",
                          ".hidden", "a b", "a\\b", "a%2f", "a/\n"}) {
    INFO(bad);
    CHECK_FALSE(BlobStore::ValidKey(bad));
  }
  CHECK_FALSE(BlobStore::ValidKey(std::string(513, 'a')));
}

TEST_CASE("put streams, hashes and stores durably", "[blob_store]") {
  TempDir dir;
  FaultFs fs(DefaultFs());
  BlobStore store(&fs, dir.path + "/blobs");
  REQUIRE(store.Init().ok());
  auto w = store.BeginPut("jobs/j_1/ckpt/e1/s5", 100);
  REQUIRE(w.ok());
  REQUIRE((*w)->Append("hello ", 6).ok());
  REQUIRE((*w)->Append("world", 5).ok());
  auto stored = (*w)->Commit(Sha256Hex("hello world"));
  REQUIRE(stored.ok());
  CHECK(stored->size == 11);
  CHECK(stored->sha256 == Sha256Hex("hello world"));
  CHECK(ReadBlob(store, "jobs/j_1/ckpt/e1/s5") == "hello world");
  CHECK(fs.syncs == 1);      // the file
  CHECK(fs.sync_dirs >= 1);  // its directory after the rename
  CHECK(fs.renames == 1);
  CHECK(CountEntries(dir.path + "/blobs/.tmp") == 0);
  // Replacing an object is atomic; deleting is idempotent.
  w = store.BeginPut("jobs/j_1/ckpt/e1/s5", -1);
  REQUIRE(w.ok());
  REQUIRE((*w)->Append("v2", 2).ok());
  REQUIRE((*w)->Commit("").ok());
  CHECK(ReadBlob(store, "jobs/j_1/ckpt/e1/s5") == "v2");
  CHECK(store.Delete("jobs/j_1/ckpt/e1/s5").ok());
  CHECK(store.Delete("jobs/j_1/ckpt/e1/s5").ok());
  CHECK(store.Open("jobs/j_1/ckpt/e1/s5").status().code() == Code::kNotFound);
  CHECK(store.Open("../etc/passwd").status().code() == Code::kInvalidArgument);
}

TEST_CASE("size limit, sha256 mismatch and injected faults leave nothing behind", "[blob_store]") {
  TempDir dir;
  FaultFs fs(DefaultFs());
  BlobStore store(&fs, dir.path + "/blobs");
  REQUIRE(store.Init().ok());
  const std::string tmp = dir.path + "/blobs/.tmp";

  SECTION("over the limit") {
    auto w = store.BeginPut("k", 4);
    REQUIRE(w.ok());
    CHECK((*w)->Append("abc", 3).ok());
    CHECK((*w)->Append("de", 2).code() == Code::kTooLarge);
  }
  SECTION("sha256 mismatch") {
    auto w = store.BeginPut("k", 100);
    REQUIRE(w.ok());
    REQUIRE((*w)->Append("abc", 3).ok());
    auto r = (*w)->Commit(Sha256Hex("abd"));
    CHECK(r.status().code() == Code::kInvalidArgument);
  }
  SECTION("a failing write") {
    fs.fail_append_at = 1;
    fs.fail_code = Code::kNoSpace;
    auto w = store.BeginPut("k", 100);
    REQUIRE(w.ok());
    CHECK((*w)->Append("a", 1).ok());
    CHECK((*w)->Append("b", 1).code() == Code::kNoSpace);
  }
  SECTION("a failing fsync") {
    fs.fail_sync = true;
    auto w = store.BeginPut("k", 100);
    REQUIRE(w.ok());
    REQUIRE((*w)->Append("abc", 3).ok());
    CHECK_FALSE((*w)->Commit("").ok());
  }
  SECTION("a failing rename") {
    fs.fail_rename = true;
    auto w = store.BeginPut("k", 100);
    REQUIRE(w.ok());
    REQUIRE((*w)->Append("abc", 3).ok());
    CHECK_FALSE((*w)->Commit("").ok());
  }
  // Writers are gone (scoped in each section): no object, no temp file.
  CHECK(store.Open("k").status().code() == Code::kNotFound);
  CHECK(CountEntries(tmp) == 0);
}

TEST_CASE("Init removes temp files left by a crash", "[blob_store]") {
  TempDir dir;
  BlobStore store(DefaultFs(), dir.path + "/blobs");
  REQUIRE(store.Init().ok());
  auto w = store.BeginPut("k", -1);
  REQUIRE(w.ok());
  REQUIRE((*w)->Append("partial", 7).ok());
  CHECK(CountEntries(dir.path + "/blobs/.tmp") == 1);
  BlobStore restarted(DefaultFs(), dir.path + "/blobs");
  REQUIRE(restarted.Init().ok());
  CHECK(CountEntries(dir.path + "/blobs/.tmp") == 0);
}
