// Network faults between a real agent and a real coordinator, through FaultProxy: the agent
// trains on through outages shorter than its lease, stops its trainer on its own before the
// lease could pass to another node during a partition, and every write it makes with the old
// epoch afterwards is refused with 409 and changes nothing.
#include <dirent.h>
#include <signal.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <sstream>

#include "coordinator/core/http.h"
#include "shared/sha256.h"
#include "tests/integration/agent_fleet.h"
#include "tests/integration/fault_proxy.h"

using namespace gleaner;
using namespace gleaner::testing;

namespace {

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Pid of the live gleaner-train child of pid, or -1.
pid_t TrainerOf(pid_t pid) {
  std::string task_dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = ::opendir(task_dir.c_str());
  if (d == nullptr) return -1;
  pid_t found = -1;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::istringstream children(ReadText(task_dir + "/" + e->d_name + "/children"));
    pid_t c;
    while (children >> c) {
      std::string stat = ReadText("/proc/" + std::to_string(c) + "/stat");
      // "<pid> (<comm>) <state> ...": a zombie (Z) is dead already.
      size_t close = stat.rfind(')');
      if (stat.find("(gleaner-train)") != std::string::npos && close != std::string::npos &&
          close + 2 < stat.size() && stat[close + 2] != 'Z') {
        found = c;
      }
    }
  }
  ::closedir(d);
  return found;
}

int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

size_t Count(const std::string& haystack, const std::string& needle) {
  size_t n = 0;
  for (size_t p = haystack.find(needle); p != std::string::npos; p = haystack.find(needle, p + 1)) {
    ++n;
  }
  return n;
}

// The parts of a job that a stale write could change.
Json LeaseState(const Json& job, const Json& events) {
  return {{"state", job["state"]},
          {"lease_epoch", job["lease_epoch"]},
          {"node_id", job["node_id"]},
          {"lease_expires_at", job["lease_expires_at"]},
          {"step", job["step"]},
          {"failures", job["failures"]},
          {"latest_checkpoint", job["latest_checkpoint"]},
          {"checkpoints", events["checkpoints"]},
          {"segments", events["segments"]},
          {"failure_list", events["failures"]}};
}

}  // namespace

TEST_CASE(
    "network faults: trains through short outages, stops before its lease can pass on, "
    "stale writes are refused",
    "[agent][e2e][netfault]") {
  TempDir dir("gleaner-netfault");
  CoordinatorOptions co;
  co.heartbeat_interval_s = 0.5;
  co.stall_after_s = 5;  // the lease: the agent stops 1.25 s before it ends (ttl / 4)
  CoordinatorProcess coord(dir.path(), co);
  std::string error;
  REQUIRE(coord.Start(&error));
  HttpClient op = coord.OperatorClient();
  auto enroll = CreateKey(coord, "enroll", &error);
  auto dev_token = CreateKey(coord, "developer", &error);
  REQUIRE(enroll);
  REQUIRE(dev_token);
  HttpClient dev = coord.Client(*dev_token);
  auto id = SubmitSyntheticJob(
      dev, 1000000, 20, &error,
      {{"params", {{"steps", 1000000}, {"checkpoint_every", 50}, {"step_ms", 10}, {"seed", 4}}}});
  REQUIRE(id);
  auto job = [&] { return op.Get("/v1/jobs/" + *id).json(); };
  auto events = [&] { return op.Get("/v1/jobs/" + *id + "/events").json(); };
  auto heartbeats = [&] {
    Json s = events()["segments"];
    return s.is_array() && !s.empty() ? s.back().value("heartbeats", int64_t(0)) : int64_t(0);
  };

  FaultProxy proxy(coord.port());
  REQUIRE(proxy.ok());
  AgentProcess a(dir.path(), "a", proxy.url(), *enroll);
  REQUIRE(a.Start(&error));
  INFO(a.Log());
  REQUIRE(
      WaitUntil([&] { return job().value("step", int64_t(0)) >= 40; }, Millis(30000), Millis(20)));
  const std::string node_a = a.NodeId();
  REQUIRE(job()["node_id"] == node_a);
  const pid_t trainer = TrainerOf(a.process().pid());
  REQUIRE(trainer > 0);

  SECTION("short outages") {
    // 1. Every chunk 100 ms late, both ways: heartbeats still arrive well inside the lease.
    proxy.SetDelay(Millis(100));
    int64_t hb = heartbeats();
    REQUIRE(WaitUntil([&] { return heartbeats() >= hb + 3; }, Millis(15000), Millis(20)));
    proxy.SetDelay(Millis(0));
    // 2. The server is unreachable (connections reset) for a few failed heartbeats.
    size_t failed = Count(a.Log(), "heartbeat failed");
    hb = heartbeats();
    proxy.Cut();
    proxy.SetMode(FaultProxy::Mode::kRefuse);
    REQUIRE(WaitUntil([&] { return Count(a.Log(), "heartbeat failed") >= failed + 2; },
                      Millis(10000), Millis(5)));
    proxy.SetMode(FaultProxy::Mode::kPass);
    REQUIRE(WaitUntil([&] { return heartbeats() > hb; }, Millis(10000), Millis(5)));
    // 3. A short partition: bytes vanish; the agent's calls time out or are cut.
    hb = heartbeats();
    const int64_t held = job().value("step", int64_t(0));
    failed = Count(a.Log(), "heartbeat failed");
    proxy.SetMode(FaultProxy::Mode::kBlackhole);
    proxy.Cut();
    REQUIRE(WaitUntil([&] { return Count(a.Log(), "heartbeat failed") >= failed + 1; },
                      Millis(10000), Millis(5)));
    proxy.SetMode(FaultProxy::Mode::kPass);
    // Training went on all along: same trainer process, same lease, progress still reported.
    REQUIRE(WaitUntil([&] { return heartbeats() >= hb + 2; }, Millis(10000), Millis(20)));
    REQUIRE(WaitUntil([&] { return job().value("step", int64_t(0)) > held + 20; }, Millis(10000),
                      Millis(20)));
    CHECK(TrainerOf(a.process().pid()) == trainer);
    Json j = job();
    CHECK(j["lease_epoch"] == 1);
    CHECK(j["node_id"] == node_a);
    CHECK(j["state"] == "running");
    CHECK(a.Log().find("lease lost") == std::string::npos);
  }

  SECTION("a long partition") {
    proxy.SetMode(FaultProxy::Mode::kBlackhole);
    proxy.Cut();
    // The agent must kill its trainer before the coordinator could hand the job to anyone.
    REQUIRE(WaitUntil([&] { return TrainerOf(a.process().pid()) != trainer; }, Millis(15000),
                      Millis(2)));
    const int64_t stopped_at = WallMs();
    Json held = job();
    int64_t expires_at = 0;
    REQUIRE(core::ParseTime(held.value("lease_expires_at", ""), &expires_at));
    INFO("trainer stopped " << (expires_at - stopped_at) << " ms before the lease expired");
    CHECK(stopped_at < expires_at);
    CHECK(held["lease_epoch"] == 1);
    REQUIRE(WaitUntil(
        [&] { return a.Log().find("lease lost, stopping the trainer") != std::string::npos; },
        Millis(5000), Millis(5)));

    // A second agent (not behind the proxy) gets the job once the lease has expired.
    AgentProcess b(dir.path(), "b", coord.url(), *enroll);
    REQUIRE(b.Start(&error));
    INFO(b.Log());
    REQUIRE(WaitUntil([&] { return job().value("lease_epoch", int64_t(0)) == 2; }, Millis(20000),
                      Millis(20)));
    REQUIRE(WaitUntil([&] { return !b.NodeId().empty() && job()["node_id"] == b.NodeId(); },
                      Millis(5000), Millis(20)));
    CHECK(WallMs() >= expires_at);

    // The partition heals. Agent A's writes with its old epoch are refused and change nothing.
    b.process().Signal(SIGSTOP);  // hold B still (its lease outlives these few calls)
    proxy.SetMode(FaultProxy::Mode::kPass);
    Json before = LeaseState(job(), events());
    Json identity = Json::parse(ReadText(dir.path() + "/a/identity.json"), nullptr, false);
    REQUIRE(identity.is_object());
    HttpClient stale(proxy.url());
    stale.set_token(identity["token"].get<std::string>());
    const std::string base = "/v1/jobs/" + *id;
    const std::string sha = Sha256Hex("stale checkpoint");
    struct Write {
      const char* path;
      Json body;
    };
    const Write writes[] = {
        {"/heartbeat", {{"epoch", 1}, {"step", 999}}},
        {"/checkpoints", {{"epoch", 1}, {"step", 999980}}},
        {"/checkpoints/999980/commit", {{"epoch", 1}, {"sha256", sha}, {"size", 16}}},
        {"/outputs", {{"epoch", 1}, {"name", "chain.txt"}}},
        {"/complete",
         {{"epoch", 1},
          {"outputs", Json::array({{{"name", "chain.txt"}, {"sha256", sha}, {"size", 16}}})}}},
        {"/fail", {{"epoch", 1}, {"reason", "zombie"}}},
        {"/release", {{"epoch", 1}, {"reason", "zombie"}}},
    };
    for (const Write& w : writes) {
      HttpResult r = stale.Post(base + w.path, w.body);
      INFO(w.path << ": " << r.Describe());
      CHECK(r.status == 409);
      CHECK(r.json()["error"]["code"] == "conflict");
    }
    CHECK(LeaseState(job(), events()) == before);
    b.process().Signal(SIGCONT);
    // B trains on; A never takes the job back.
    const int64_t step = job().value("step", int64_t(0));
    REQUIRE(WaitUntil([&] { return job().value("step", int64_t(0)) > step + 20; }, Millis(10000),
                      Millis(20)));
    CHECK(job()["lease_epoch"] == 2);
    CHECK(TrainerOf(a.process().pid()) == -1);
    CHECK(a.process().Running());
  }
  REQUIRE(op.Post("/v1/jobs/" + *id + "/cancel", Json::object()).status == 200);
}
