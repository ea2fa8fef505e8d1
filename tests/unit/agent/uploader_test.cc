// The background checkpoint uploader against a fake coordinator that fails on purpose.
#include "agent/supervisor/uploader.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>

#include "agent/protocol/checkpoint_dir.h"
#include "agent/protocol/sample_set.h"
#include "agent/supervisor/archive.h"
#include "fake_http.h"
#include "shared/native/files.h"
#include "shared/sha256.h"
#include "test_util.h"

using namespace gleaner;
using namespace gleaner::agent;
using gleaner::testing::FakeHttp;
using gleaner::testing::Reply;
using gleaner::testing::TempDir;

namespace {

// meta: the manifest's meta (the last step's records its outputs).
std::string MakeCheckpoint(const std::string& work, int64_t step,
                           const Json& meta = Json::object()) {
  std::string dir = train::CheckpointDirFor(work, step);
  auto w = train::CheckpointWriter::Begin(dir);
  REQUIRE(w.ok());
  REQUIRE(w->AddFile("state", "step " + std::to_string(step)).ok());
  REQUIRE(w->Commit("synthetic", "j", step, meta).ok());
  return dir;
}

// A coordinator + store: PUTs fail `put_failures` times first; commits answer `commit_status`.
struct FakeCoordinator {
  std::mutex mu;
  int put_failures = 0;
  int commit_status = 200;
  std::map<std::string, std::string> stored;  // url -> bytes
  std::vector<int64_t> committed;
  std::vector<Json> commits;         // bodies of checkpoints/{step}/commit
  std::vector<Json> sample_commits;  // bodies of samples/{step}/commit, with the url

  Result<net::HttpResponse> Handle(const net::HttpCall& c) {
    std::lock_guard<std::mutex> lock(mu);
    if (c.method == "POST" && c.url.find("/samples") != std::string::npos) {
      auto j = ParseJson(c.body);
      if (c.url.find("/commit") != std::string::npos) {
        sample_commits.push_back({{"url", c.url}, {"body", *j}});
        return Reply(200, R"({"committed":true})");
      }
      return Reply(200, DumpJson(Json{{"key", "k"},
                                      {"url", "http://store/s" + DumpJson((*j)["step"]) + "-" +
                                                  DumpJson((*j)["index"])}}));
    }
    if (c.method == "POST" && c.url.find("/commit") != std::string::npos) {
      if (commit_status != 200) return Reply(commit_status, R"({"error":{"code":"conflict"}})");
      auto j = ParseJson(c.body);
      committed.push_back((*j)["step"].get<int64_t>());
      commits.push_back(*j);
      return Reply(200);
    }
    if (c.method == "POST" && c.url.find("/checkpoints") != std::string::npos) {
      auto j = ParseJson(c.body);
      return Reply(
          200,
          DumpJson(Json{{"key", "k"},
                        {"url", "http://store/" + std::to_string((*j)["step"].get<int64_t>())}}));
    }
    if (c.method == "PUT") {
      if (put_failures > 0) {
        --put_failures;
        return Status::Unavailable("connection reset");
      }
      stored[c.url] = *files::ReadAll(c.upload_file);
      return Reply(200);
    }
    return Reply(404);
  }
};

}  // namespace

TEST_CASE("uploads are retried, committed in order, recorded, and old ones pruned", "[uploader]") {
  TempDir t;
  FakeCoordinator fc;
  fc.put_failures = 3;
  FakeHttp http([&](const net::HttpCall& c) { return fc.Handle(c); });
  CoordinatorApi api(&http, "http://coord");
  StateDir state(t / "state");
  REQUIRE(state.Init().ok());
  std::string work = t / "work";
  {
    CheckpointUploader up(&api, &state, "j", 1, work, /*keep=*/2);
    for (int64_t step : {5, 10, 15}) up.Enqueue(step, MakeCheckpoint(work, step));
    REQUIRE(up.Drain(30));
    CHECK(up.last_committed() == 15);
    CHECK_FALSE(up.lease_lost());
  }
  CHECK(fc.committed == std::vector<int64_t>{5, 10, 15});
  // What was stored unpacks to the checkpoint that was written.
  REQUIRE(files::WriteSynced(t / "got.gckpt", fc.stored["http://store/10"]).ok());
  auto m = UnpackCheckpoint(t / "got.gckpt", t / "restored");
  REQUIRE(m.ok());
  CHECK(m->step == 10);
  CHECK(*files::ReadAll(t / "restored/state") == "step 10");
  // Nothing left pending; only the newest 2 kept locally.
  auto cur = state.LoadCurrentJob();
  REQUIRE(cur.ok());
  REQUIRE(cur->has_value());
  CHECK((*cur)->pending.empty());
  CHECK_FALSE(files::Exists(train::CheckpointDirFor(work, 5)));
  CHECK(files::Exists(train::CheckpointDirFor(work, 15)));
}

TEST_CASE("a 409 on commit means the lease is gone: the queue is dropped", "[uploader]") {
  TempDir t;
  FakeCoordinator fc;
  fc.commit_status = 409;
  FakeHttp http([&](const net::HttpCall& c) { return fc.Handle(c); });
  CoordinatorApi api(&http, "http://coord");
  StateDir state(t / "state");
  REQUIRE(state.Init().ok());
  std::string work = t / "work";
  CheckpointUploader up(&api, &state, "j", 1, work, 3);
  up.Enqueue(5, MakeCheckpoint(work, 5));
  up.Enqueue(10, MakeCheckpoint(work, 10));
  REQUIRE(up.Drain(30));
  CHECK(up.lease_lost());
  CHECK(up.last_committed() == -1);
  CHECK(fc.committed.empty());
  // The failed upload stays recorded for a restart to finish or drop.
  auto cur = state.LoadCurrentJob();
  REQUIRE(cur.ok());
  REQUIRE(cur->has_value());
  CHECK((*cur)->pending.size() == 1);
}

TEST_CASE("sample sets go up after their checkpoint, and DropCheckpointsBefore keeps them",
          "[uploader][samples]") {
  TempDir t;
  FakeCoordinator fc;
  fc.put_failures = 1;
  FakeHttp http([&](const net::HttpCall& c) { return fc.Handle(c); });
  CoordinatorApi api(&http, "http://coord");
  StateDir state(t / "state");
  REQUIRE(state.Init().ok());
  std::string work = t / "work";
  train::SampleSet set;
  set.step = 10;
  set.seed = 3;
  set.seconds = 0.75;
  set.resolution = 8;
  set.sample_steps = 25;
  set.guidance_scale = 7.5;
  set.prompts = {{"a cat", ""}, {"a dog", "blur"}};
  const std::string dir = train::SampleDirFor(work, 10);
  REQUIRE(train::WriteSampleSet(dir, "synthetic", "j", set, {"png-0", "png-1"}).ok());
  {
    CheckpointUploader up(&api, &state, "j", 1, work, 3);
    up.Enqueue(10, MakeCheckpoint(work, 10));
    up.EnqueueSamples(10, dir);
    REQUIRE(up.Drain(30));
  }
  CHECK(fc.committed == std::vector<int64_t>{10});
  REQUIRE(fc.sample_commits.size() == 1);
  const Json& c = fc.sample_commits[0];
  CHECK(c["url"] == "http://coord/v1/jobs/j/samples/10/commit");
  CHECK(c["body"]["epoch"] == 1);
  CHECK(c["body"]["seed"] == 3);
  CHECK(c["body"]["seconds"] == 0.75);
  REQUIRE(c["body"]["images"].size() == 2);
  CHECK(c["body"]["images"][1]["negative_prompt"] == "blur");
  CHECK(c["body"]["images"][1]["sha256"] == HexEncode(Sha256Of("png-1")));
  CHECK(fc.stored["http://store/s10-1"] == "png-1");
  CHECK_FALSE(files::Exists(dir));  // removed once committed

  // DropCheckpointsBefore(40) while the worker is busy with checkpoint 20: checkpoint 30
  // behind it is dropped, the last step's (40) and the sample set behind it are still uploaded.
  FakeCoordinator fc2;
  std::atomic<bool> in_put{false}, release{false};
  FakeHttp http2([&](const net::HttpCall& c2) {
    if (c2.method == "PUT" && !release) {
      in_put = true;
      while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return fc2.Handle(c2);
  });
  CoordinatorApi api2(&http2, "http://coord");
  REQUIRE(train::WriteSampleSet(dir, "synthetic", "j", set, {"png-0", "png-1"}).ok());
  {
    CheckpointUploader up(&api2, &state, "j", 1, work, 3);
    up.Enqueue(20, MakeCheckpoint(work, 20));
    up.Enqueue(30, MakeCheckpoint(work, 30));
    up.Enqueue(40, MakeCheckpoint(work, 40));
    up.EnqueueSamples(10, dir);
    for (int i = 0; i < 10000 && !in_put; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    REQUIRE(in_put);
    up.DropCheckpointsBefore(40);
    release = true;
    REQUIRE(up.Drain(30));
  }
  CHECK(fc2.committed == std::vector<int64_t>{20, 40});
  CHECK(fc2.sample_commits.size() == 1);
}

TEST_CASE(
    "the last step's checkpoint is committed with the outputs its manifest records, also "
    "after a restart",
    "[uploader]") {
  TempDir tmp;
  const std::string work = tmp.path() + "/work";
  StateDir state(tmp.path() + "/state");
  REQUIRE(state.Init().ok());
  const std::vector<ManifestFile> outputs = {{"chain.txt", 5, Sha256Hex("chain")}};
  FakeCoordinator fc;
  FakeHttp http([&](const net::HttpCall& c) { return fc.Handle(c); });
  CoordinatorApi api(&http, "http://coord");
  {
    CheckpointUploader up(&api, &state, "j", 1, work, 3);
    up.Enqueue(10, MakeCheckpoint(work, 10));
    up.Enqueue(20, MakeCheckpoint(work, 20, {{"outputs", FileListToJson(outputs)}}));
    REQUIRE(up.Drain(30));
  }
  REQUIRE(fc.commits.size() == 2);
  CHECK_FALSE(fc.commits[0].contains("outputs"));
  REQUIRE(fc.commits[1].contains("outputs"));
  CHECK(fc.commits[1]["outputs"] ==
        Json::array({{{"name", "chain.txt"}, {"sha256", Sha256Hex("chain")}, {"size", 5}}}));

  // Recorded as pending with its outputs, they survive a restart (the state dir's record).
  PendingUpload p{30, tmp.path() + "/a.gckpt", Sha256Hex("x"), 1, outputs};
  REQUIRE(state.SaveCurrentJob(CurrentJob{"j", 2, {}}).ok());
  REQUIRE(state.AddPending("j", 2, p).ok());
  auto loaded = state.LoadCurrentJob();
  REQUIRE(loaded.ok());
  REQUIRE(*loaded);
  REQUIRE((*loaded)->pending.size() == 1);
  CHECK(SameFiles((*loaded)->pending[0].outputs, outputs));
  // A malformed checkpoint record of outputs is refused, not committed without them.
  const std::string bad_dir =
      MakeCheckpoint(work, 50, {{"outputs", Json::array({{{"name", "a/b"}}})}});
  FakeCoordinator fc2;
  FakeHttp http2([&](const net::HttpCall& c) { return fc2.Handle(c); });
  CoordinatorApi api2(&http2, "http://coord");
  {
    CheckpointUploader up(&api2, &state, "j", 3, work, 3);
    up.Enqueue(50, bad_dir);
    REQUIRE(up.Drain(30));
  }
  CHECK(fc2.committed.empty());
}
