#include "agent/protocol/checkpoint_dir.h"

#include <catch2/catch.hpp>

#include "agent/protocol/sample_set.h"
#include "shared/job_params.h"
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

TEST_CASE("sample sets: written like checkpoints, verified strictly, the event round-trips",
          "[ckpt][samples]") {
  TempDir t;
  auto params = NormalizeParams(
      "synthetic",
      {{"steps", 30},
       {"seed", 4},
       {"sample_prompts", Json::array({"a", {{"prompt", "b"}, {"negative_prompt", "c"}}})}});
  REQUIRE(params.ok());
  auto set = train::SampleSetFromParams(*params);
  REQUIRE(set.ok());
  CHECK(set->seed == 4);  // sample_seed defaults to the job's seed
  CHECK(set->prompts[1].negative_prompt == "c");
  CHECK(train::SampleSetFromParams(Json{{"steps", 30}}).status().code() == Code::kNotFound);
  CHECK(train::SampleDue(30, 30, 100));  // the last step, always
  CHECK(train::SampleDue(20, 30, 10));
  CHECK_FALSE(train::SampleDue(25, 30, 10));
  CHECK_FALSE(train::SampleDue(0, 30, 10));

  set->step = 10;
  set->seconds = 0.5;
  const std::string dir = train::SampleDirFor(t.path(), 10);
  CHECK(dir == t.path() + "/samples/0000000010");
  CHECK(!train::WriteSampleSet(dir, "synthetic", "j", *set, {"only one"}).ok());
  REQUIRE(train::WriteSampleSet(dir, "synthetic", "j", *set, {"png0", "png1"}).ok());
  CHECK_FALSE(files::Exists(dir + ".tmp"));
  auto back = train::VerifySampleDir(dir);
  REQUIRE(back.ok());
  CHECK(back->step == 10);
  CHECK(back->seconds == 0.5);
  CHECK(back->prompts.size() == 2);
  // A changed image fails verification.
  REQUIRE(files::WriteDurable(dir + "/1.png", "png!").ok());
  CHECK(train::VerifySampleDir(dir).status().code() == Code::kCorruption);

  for (const char* bad :
       {R"({"format":"gleaner-samples","version":2,"step":1,"seed":0,"seconds":0,"resolution":8,)"
        R"("sample_steps":1,"guidance_scale":1,"prompts":[{"prompt":"a"}]})",
        R"({"format":"gleaner-samples","version":1,"step":1,"seed":0,"seconds":-1,"resolution":8,)"
        R"("sample_steps":1,"guidance_scale":1,"prompts":[{"prompt":"a"}]})",
        R"({"format":"gleaner-samples","version":1,"step":1,"seed":0,"seconds":0,"resolution":8,)"
        R"("sample_steps":1,"guidance_scale":1,"prompts":[]})",
        "[]", "not json"}) {
    INFO(bad);
    CHECK(train::ParseSampleSet(bad).status().code() == Code::kCorruption);
  }

  ProgressEvent e;
  e.type = ProgressEvent::Type::kSamples;
  e.step = 10;
  e.dir = dir;
  e.seconds = 1.25;
  auto parsed = ParseProgressEvent(FormatProgressEvent(e));
  REQUIRE(parsed.ok());
  CHECK(parsed->type == ProgressEvent::Type::kSamples);
  CHECK(parsed->dir == dir);
  CHECK(parsed->seconds == 1.25);
  CHECK(!ParseProgressEvent("gleaner samples step=1").ok());  // no dir
  CHECK(!ParseProgressEvent("gleaner samples step=1 dir=x seconds=-1").ok());
  CHECK(!ParseProgressEvent("gleaner samples step=1 dir=x seconds=nan").ok());
}

TEST_CASE("the class_images event round-trips without a step", "[ckpt]") {
  ProgressEvent e;
  e.type = ProgressEvent::Type::kClassImages;
  e.count = 200;
  e.seconds = 310.5;
  const std::string line = FormatProgressEvent(e);
  CHECK(line == "gleaner class_images count=200 seconds=310.5");
  auto parsed = ParseProgressEvent(line);
  REQUIRE(parsed.ok());
  CHECK(parsed->type == ProgressEvent::Type::kClassImages);
  CHECK(parsed->count == 200);
  CHECK(parsed->seconds == 310.5);
  CHECK(!ParseProgressEvent("gleaner class_images count=-1 seconds=1").ok());
  CHECK(!ParseProgressEvent("gleaner class_images count=x").ok());
}
