#include "agent/supervisor/archive.h"

#include <catch2/catch.hpp>

#include "agent/protocol/checkpoint_dir.h"
#include "shared/native/files.h"
#include "test_util.h"

using namespace gleaner;
using gleaner::testing::TempDir;

namespace {

std::string MakeCheckpoint(const TempDir& t, int64_t step) {
  std::string dir = train::CheckpointDirFor(t / "work", step);
  auto w = train::CheckpointWriter::Begin(dir);
  REQUIRE(w.ok());
  REQUIRE(w->AddFile("state.json", "{\"step\":" + std::to_string(step) + "}").ok());
  REQUIRE(w->AddFile("weights.bin", std::string(3000, '\x07')).ok());
  REQUIRE(w->AddFile("empty", "").ok());
  REQUIRE(w->Commit("synthetic", "job-1", step).ok());
  return dir;
}

}  // namespace

TEST_CASE("a checkpoint directory packs into one file and unpacks identically", "[archive]") {
  TempDir t;
  std::string dir = MakeCheckpoint(t, 7);
  auto packed = agent::PackCheckpoint(dir, t / "ckpt.gckpt");
  REQUIRE(packed.ok());
  CHECK(packed->step == 7);
  auto bytes = files::ReadAll(t / "ckpt.gckpt");
  REQUIRE(bytes.ok());
  CHECK(bytes->substr(0, 8) == "GLNRCKPT");
  auto unpacked = agent::UnpackCheckpoint(t / "ckpt.gckpt", t / "restored");
  REQUIRE(unpacked.ok());
  CHECK(unpacked->step == 7);
  CHECK(*files::ReadAll(t / "restored/weights.bin") == std::string(3000, '\x07'));
  CHECK(*files::ReadAll(t / "restored/MANIFEST.json") == *files::ReadAll(dir + "/MANIFEST.json"));
  CHECK_FALSE(files::Exists(t / "restored.tmp"));
}

TEST_CASE("packing refuses a directory that fails its manifest", "[archive]") {
  TempDir t;
  std::string dir = MakeCheckpoint(t, 1);
  REQUIRE(files::WriteSynced(dir + "/weights.bin", "tampered").ok());
  CHECK(agent::PackCheckpoint(dir, t / "x.gckpt").status().code() == Code::kCorruption);
}

TEST_CASE("every flipped byte and every truncation of an archive is rejected", "[archive]") {
  TempDir t;
  std::string dir = MakeCheckpoint(t, 3);
  REQUIRE(agent::PackCheckpoint(dir, t / "good.gckpt").ok());
  std::string good = *files::ReadAll(t / "good.gckpt");
  // Flip one byte at a spread of positions, including the header and the manifest at the end.
  for (size_t pos = 0; pos < good.size(); pos += (pos < 64 || pos + 400 > good.size()) ? 1 : 97) {
    std::string bad = good;
    bad[pos] = char(bad[pos] ^ 0x41);
    REQUIRE(files::WriteSynced(t / "bad.gckpt", bad).ok());
    auto r = agent::UnpackCheckpoint(t / "bad.gckpt", t / "out");
    INFO("flipped byte " << pos);
    CHECK_FALSE(r.ok());
    CHECK_FALSE(files::Exists(t / "out/MANIFEST.json"));
  }
  for (size_t len :
       {size_t(0), size_t(5), size_t(16), size_t(40), good.size() / 2, good.size() - 1}) {
    REQUIRE(files::WriteSynced(t / "short.gckpt", good.substr(0, len)).ok());
    INFO("truncated to " << len);
    CHECK_FALSE(agent::UnpackCheckpoint(t / "short.gckpt", t / "out").ok());
  }
  REQUIRE(files::WriteSynced(t / "long.gckpt", good + "x").ok());
  CHECK_FALSE(agent::UnpackCheckpoint(t / "long.gckpt", t / "out").ok());
}

TEST_CASE("archive entries cannot escape the directory", "[archive]") {
  TempDir t;
  std::string a("GLNRCKPT\x01\x00\x00\x00\x01\x00\x00\x00", 16);
  std::string name = "../evil";
  a += char(name.size());
  a += '\0';
  a += name;
  a += std::string("\x01\0\0\0\0\0\0\0", 8);
  a += "x";
  REQUIRE(files::WriteSynced(t / "evil.gckpt", a).ok());
  auto r = agent::UnpackCheckpoint(t / "evil.gckpt", t / "out");
  CHECK(r.status().code() == Code::kCorruption);
  CHECK_FALSE(files::Exists(t / "evil"));
}
