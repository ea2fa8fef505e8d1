// End-to-end: coordinator + gleaner-agent + gleaner-train as real processes on loopback.
#include <dirent.h>
#include <signal.h>

#include <catch2/catch.hpp>
#include <map>

#include "tests/integration/agent_fleet.h"

using namespace gleaner;
using namespace gleaner::testing;

namespace {

Json Params(int64_t seed, int64_t steps, int64_t step_ms, int64_t every) {
  return {{"seed", seed}, {"steps", steps}, {"step_ms", step_ms}, {"checkpoint_every", every}};
}

// Every regular file under dir (recursive).
void ListFiles(const std::string& dir, std::vector<std::string>* out) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return;
  while (dirent* e = readdir(d)) {
    std::string n = e->d_name;
    if (n == "." || n == "..") continue;
    std::string p = dir + "/" + n;
    if (e->d_type == DT_DIR) {
      ListFiles(p, out);
    } else {
      out->push_back(p);
    }
  }
  closedir(d);
}

// Number of live processes whose command line contains `needle`.
int ProcessesMentioning(const std::string& needle) {
  int n = 0;
  DIR* d = opendir("/proc");
  if (d == nullptr) return 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    std::string cmd = ReadFile(std::string("/proc/") + e->d_name + "/cmdline");
    for (char& c : cmd) c = c == '\0' ? ' ' : c;
    std::string stat = ReadFile(std::string("/proc/") + e->d_name + "/stat");
    bool zombie = stat.find(") Z ") != std::string::npos;
    if (!zombie && cmd.find(needle) != std::string::npos) ++n;
  }
  closedir(d);
  return n;
}

std::string Tail(const std::string& s) {
  return s.size() < 3000 ? s : s.substr(s.size() - 3000);
}

}  // namespace

TEST_CASE("3 agents, 12 jobs, one agent SIGKILLed and one SIGTERMed: every chain is exact",
          "[agent][e2e]") {
  TempDir dir("gleaner-e2e-fleet");
  Fleet fleet(dir.path());
  REQUIRE(fleet.ok());
  std::map<std::string, int64_t> seeds;
  const int64_t steps = 60, every = 5;
  std::vector<std::string> ids;
  for (int i = 0; i < 12; ++i) {
    std::string id = fleet.Submit(Params(1000 + i, steps, 25, every));
    REQUIRE(!id.empty());
    ids.push_back(id);
    seeds[id] = 1000 + i;
  }
  AgentProcess& a = fleet.AddAgent("a");
  AgentProcess& b = fleet.AddAgent("b");
  AgentProcess& c = fleet.AddAgent("c");
  std::string error;
  REQUIRE(a.Start(&error));
  REQUIRE(b.Start(&error));
  REQUIRE(c.Start(&error));
  REQUIRE(WaitUntil([&] { return !a.NodeId().empty() && !b.NodeId().empty(); }, Millis(10000)));

  // SIGKILL agent a in the middle of a job.
  std::string killed_job;
  REQUIRE(WaitUntil([&] { return !(killed_job = fleet.RunningJobOf(a.NodeId(), 12, 40)).empty(); },
                    Millis(20000), Millis(20)));
  CHECK(ProcessesMentioning(dir.path() + "/a/jobs/") >= 1);  // a's trainer is running
  a.process().Kill();
  // Its trainer dies with it (parent-death signal).
  CHECK(WaitUntil([&] { return ProcessesMentioning(dir.path() + "/a/jobs/") == 0; }, Millis(5000)));
  // SIGTERM agent b in the middle of a job: it hands the job back and exits 0.
  std::string termed_job;
  REQUIRE(WaitUntil([&] { return !(termed_job = fleet.RunningJobOf(b.NodeId(), 8, 40)).empty(); },
                    Millis(20000), Millis(20)));
  b.process().Signal(SIGTERM);
  auto b_exit = b.process().Wait(Millis(10000));
  INFO(Tail(b.Log()));
  REQUIRE(b_exit.has_value());
  CHECK(b_exit->clean());
  CHECK(b.Log().find("released at step") != std::string::npos);
  // Restart both later, with their state dirs.
  REQUIRE(a.Start(&error));
  REQUIRE(b.Start(&error));

  INFO("agent a:\n" << Tail(a.Log()));
  REQUIRE(fleet.WaitAllFinal(ids, Millis(60000)));
  // The killed agent found its job in its state dir on restart and settled it.
  CHECK(a.Log().find("job " + killed_job + ": found from a previous run") != std::string::npos);
  for (const std::string& id : ids) {
    INFO("job " << id);
    CHECK(fleet.Job(id).value("state", "") == "completed");
    CHECK(fleet.ResultChain(id) == ExpectedChain(seeds[id], steps) + "\n");
  }

  // After SIGTERM no step is re-trained: the released lease committed its last step and the
  // next lease started exactly there.
  Json ev = fleet.Events(termed_job);
  INFO(ev.dump());
  const Json& segs = ev["segments"];
  bool found = false;
  for (size_t i = 0; i + 1 < segs.size(); ++i) {
    if (segs[i].value("node_id", "") != b.NodeId() ||
        segs[i].value("end_reason", "") != "released") {
      continue;
    }
    found = true;
    CHECK(segs[i]["step_committed"].get<int64_t>() >= segs[i]["step_end"].get<int64_t>());
    CHECK(segs[i + 1]["step_start"].get<int64_t>() == segs[i]["step_committed"].get<int64_t>());
  }
  CHECK(found);

  // After SIGKILL at most checkpoint_every steps are re-trained.
  Json kev = fleet.Events(killed_job);
  INFO(kev.dump());
  const Json& ksegs = kev["segments"];
  REQUIRE(ksegs.size() >= 2);
  for (size_t i = 0; i + 1 < ksegs.size(); ++i) {
    CHECK(ksegs[i + 1]["step_start"].get<int64_t>() >= ksegs[i]["step_end"].get<int64_t>() - every);
  }
}

TEST_CASE("a node whose trainer fails hands the job on, a job crashing everywhere fails",
          "[agent][e2e]") {
  TempDir dir("gleaner-e2e-fail");
  Fleet fleet(dir.path());
  REQUIRE(fleet.ok());
  std::string good = fleet.Submit(Params(7, 30, 10, 10));
  Json bad_params = Params(8, 30, 5, 10);
  bad_params["crash_at_step"] = 12;  // abort() in the trainer: the agents survive it
  std::string bad = fleet.Submit(bad_params, /*max_failures=*/2);
  REQUIRE(!good.empty());
  REQUIRE(!bad.empty());
  // Agent "broken" fails every job at step 5 (a bad GPU); the others are fine.
  AgentProcess& broken = fleet.AddAgent("broken", {{"GLEANER_SYNTHETIC_FAIL_AT_STEP", "5"}});
  std::string error;
  REQUIRE(broken.Start(&error));
  REQUIRE(WaitUntil([&] { return fleet.Job(good).value("failures", 0) >= 1; }, Millis(15000)));
  AgentProcess& x = fleet.AddAgent("x");
  AgentProcess& y = fleet.AddAgent("y");
  REQUIRE(x.Start(&error));
  REQUIRE(y.Start(&error));
  INFO(Tail(broken.Log()));
  REQUIRE(fleet.WaitAllFinal({good, bad}, Millis(30000)));
  Json g = fleet.Job(good);
  CHECK(g.value("state", "") == "completed");
  CHECK(fleet.ResultChain(good) == ExpectedChain(7, 30) + "\n");
  Json b = fleet.Job(bad);
  CHECK(b.value("state", "") == "failed");
  CHECK(b.value("failures", 0) == 2);
  // The failure report carries the trainer's exit status and its last stderr lines.
  Json ev = fleet.Events(good);
  INFO(ev.dump());
  REQUIRE(ev["failures"].size() >= 1);
  std::string reason = ev["failures"][0].value("reason", "");
  CHECK(reason.find("exit 1") != std::string::npos);  // the hook's node fault
  CHECK(reason.find("fail_at_step 5") != std::string::npos);
  Json bev = fleet.Events(bad);
  REQUIRE(bev["failures"].size() == 2);
  bool aborted = false;  // a healthy node's trainer hit crash_at_step
  for (const Json& f : bev["failures"]) {
    aborted |= f.value("reason", "").find("signal 6 (Aborted)") != std::string::npos;
  }
  CHECK(aborted);
  CHECK(x.process().Running());
  CHECK(y.process().Running());
}

TEST_CASE("a corrupted checkpoint object is detected and the job restarts from scratch",
          "[agent][e2e]") {
  TempDir dir("gleaner-e2e-corrupt");
  Fleet fleet(dir.path());
  REQUIRE(fleet.ok());
  const int64_t steps = 80;
  std::string id = fleet.Submit(Params(42, steps, 20, 10));
  REQUIRE(!id.empty());
  AgentProcess& a = fleet.AddAgent("a");
  std::string error;
  REQUIRE(a.Start(&error));
  REQUIRE(fleet.WaitCheckpoint(id, 20, Millis(20000)));
  // A clean hand-back, so the latest checkpoint is settled; then flip bytes in storage.
  a.process().Signal(SIGTERM);
  REQUIRE(a.process().Wait(Millis(10000)).has_value());
  std::vector<std::string> blobs;
  ListFiles(fleet.coordinator().options().data_dir + "/blobs/jobs/" + id + "/ckpt", &blobs);
  REQUIRE(!blobs.empty());
  for (const std::string& path : blobs) {
    std::string bytes = ReadFile(path);
    REQUIRE(bytes.size() > 40);
    bytes[bytes.size() / 2] ^= 0x5a;
    REQUIRE(WriteFile(path, bytes));
  }
  REQUIRE(a.Start(&error));
  INFO(Tail(a.Log()));
  REQUIRE(fleet.WaitAllFinal({id}, Millis(30000)));
  CHECK(fleet.Job(id).value("state", "") == "completed");
  CHECK(fleet.ResultChain(id) == ExpectedChain(42, steps) + "\n");
  CHECK(a.Log().find("failed verification") != std::string::npos);
  CHECK(a.Log().find("starting from scratch") != std::string::npos);
}

TEST_CASE("agents ride out a coordinator restart and nothing is lost", "[agent][e2e]") {
  TempDir dir("gleaner-e2e-restart");
  Fleet fleet(dir.path(), 0.2, {"--stall-after", "3"});
  REQUIRE(fleet.ok());
  std::vector<std::string> ids;
  for (int i = 0; i < 4; ++i) ids.push_back(fleet.Submit(Params(500 + i, 60, 25, 10)));
  for (const std::string& id : ids) REQUIRE(!id.empty());
  AgentProcess& a = fleet.AddAgent("a");
  AgentProcess& b = fleet.AddAgent("b");
  std::string error;
  REQUIRE(a.Start(&error));
  REQUIRE(b.Start(&error));
  REQUIRE(WaitUntil([&] { return fleet.Job(ids[0]).value("step", 0) >= 15; }, Millis(20000),
                    Millis(20)));
  fleet.coordinator().process().Kill();
  // Agents keep training and retrying while it is gone.
  REQUIRE(WaitUntil(
      [&] {
        return a.Log().find("retrying") != std::string::npos ||
               b.Log().find("retrying") != std::string::npos;
      },
      Millis(10000), Millis(20)));
  REQUIRE(fleet.RestartCoordinator(&error));
  INFO(Tail(a.Log()) << "\n---\n" << Tail(b.Log()));
  REQUIRE(fleet.WaitAllFinal(ids, Millis(60000)));
  for (int i = 0; i < 4; ++i) {
    CHECK(fleet.Job(ids[i]).value("state", "") == "completed");
    CHECK(fleet.ResultChain(ids[i]) == ExpectedChain(500 + i, 60) + "\n");
  }
  CHECK(a.process().Running());
  CHECK(b.process().Running());
}

TEST_CASE("two agents on one machine: the second stops at once, naming --machine-id",
          "[agent][e2e]") {
  TempDir dir("gleaner-e2e-twins");
  Fleet fleet(dir.path());
  REQUIRE(fleet.ok());
  AgentProcess& a = fleet.AddAgent("a", {}, {"--machine-id", "one-pc"});
  AgentProcess& b = fleet.AddAgent("b", {}, {"--machine-id", "one-pc"});
  std::string error;
  REQUIRE(a.Start(&error));
  REQUIRE(WaitUntil([&] { return !a.NodeId().empty(); }, Millis(10000)));
  REQUIRE(b.Start(&error));
  std::optional<ExitStatus> ended = b.process().Wait(Millis(10000));
  INFO(Tail(b.Log()));
  REQUIRE(ended.has_value());
  CHECK(!ended->clean());
  CHECK(b.Log().find("--machine-id") != std::string::npos);
  CHECK(b.NodeId().empty());
  // The first keeps its identity.
  CHECK(a.process().Running());
  CHECK(a.Log().find("token refused") == std::string::npos);
}
