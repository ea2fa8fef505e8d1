// The background checkpoint uploader against a fake coordinator that fails on purpose.
#include "agent/supervisor/uploader.h"

#include <catch2/catch.hpp>
#include <map>
#include <mutex>

#include "agent/protocol/checkpoint_dir.h"
#include "agent/supervisor/archive.h"
#include "fake_http.h"
#include "shared/native/files.h"
#include "test_util.h"

using namespace gleaner;
using namespace gleaner::agent;
using gleaner::testing::FakeHttp;
using gleaner::testing::Reply;
using gleaner::testing::TempDir;

namespace {

std::string MakeCheckpoint(const std::string& work, int64_t step) {
  std::string dir = train::CheckpointDirFor(work, step);
  auto w = train::CheckpointWriter::Begin(dir);
  REQUIRE(w.ok());
  REQUIRE(w->AddFile("state", "step " + std::to_string(step)).ok());
  REQUIRE(w->Commit("synthetic", "j", step).ok());
  return dir;
}

// A coordinator + store: PUTs fail `put_failures` times first; commits answer `commit_status`.
struct FakeCoordinator {
  std::mutex mu;
  int put_failures = 0;
  int commit_status = 200;
  std::map<std::string, std::string> stored;  // url -> bytes
  std::vector<int64_t> committed;

  Result<net::HttpResponse> Handle(const net::HttpCall& c) {
    std::lock_guard<std::mutex> lock(mu);
    if (c.method == "POST" && c.url.find("/commit") != std::string::npos) {
      if (commit_status != 200) return Reply(commit_status, R"({"error":{"code":"conflict"}})");
      auto j = ParseJson(c.body);
      committed.push_back((*j)["step"].get<int64_t>());
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
