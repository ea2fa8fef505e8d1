// The owner gate with injected readings, the status board, the readings' parsers and the control
// socket.
#include "agent/supervisor/owner_gate.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>

#include "agent/supervisor/control_socket.h"
#include "shared/native/files.h"
#include "test_util.h"

using namespace gleaner;
using namespace gleaner::agent;

namespace {

// Readings the test sets; the gate reads them on its own thread.
class FakeReadings : public OwnerReadingSource {
 public:
  void Read(const OwnerControls&, OwnerReadings* r) override {
    std::lock_guard<std::mutex> lock(mu_);
    OwnerReadings copy = r_;
    copy.paused = r->paused;
    *r = copy;
    ++reads_;
  }
  void Set(const OwnerReadings& r) {
    std::lock_guard<std::mutex> lock(mu_);
    r_ = r;
  }
  int reads() {
    std::lock_guard<std::mutex> lock(mu_);
    return reads_;
  }

 private:
  std::mutex mu_;
  OwnerReadings r_;
  int reads_ = 0;
};

bool Eventually(const std::function<bool()>& cond, double seconds = 5) {
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return cond();
}

}  // namespace

TEST_CASE("owner gate: a control turning 'not allowed' asks for the job back", "[owner]") {
  testing::TempDir t;
  OwnerControls c;
  c.pause_programs = {"game"};
  c.check_interval_s = 0.02;
  auto* fake = new FakeReadings();
  StatusBoard board;
  HandBack hand_back;
  OwnerGate gate(c, std::unique_ptr<OwnerReadingSource>(fake), t / "owner.json", &board, &hand_back,
                 7);
  REQUIRE(gate.Start().ok());
  CHECK(gate.decision().allowed);
  StopToken stop;
  CHECK(gate.WaitAllowed(stop));
  CHECK_FALSE(hand_back.requested());

  OwnerReadings r;
  r.processes = {{"game", "game"}};
  fake->Set(r);
  REQUIRE(Eventually([&] { return hand_back.requested(); }));
  CHECK(hand_back.reason() == "program 'game' is running");
  CHECK(hand_back.SecondsLeft() > 5);
  CHECK(hand_back.SecondsLeft() <= 7);
  CHECK(board.Snapshot()["reason"] == "program 'game' is running");
  CHECK(board.Snapshot()["state"] == "not working");

  // The main loop waits while not allowed and goes on once the game exits.
  std::thread later([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    fake->Set(OwnerReadings{});
  });
  auto t0 = std::chrono::steady_clock::now();
  CHECK(gate.WaitAllowed(stop));
  CHECK(std::chrono::steady_clock::now() - t0 >= std::chrono::milliseconds(90));
  later.join();
  hand_back.Clear();
  int reads = fake->reads();
  REQUIRE(Eventually([&] { return fake->reads() > reads + 2; }));
  CHECK_FALSE(hand_back.requested());  // allowed: nothing asks for the job any more

  // Stop ends a wait.
  fake->Set(r);
  REQUIRE(Eventually([&] { return !gate.decision().allowed; }));
  stop.Request();
  CHECK_FALSE(gate.WaitAllowed(stop));
}

TEST_CASE("owner gate: pause is durable and answered on commands", "[owner]") {
  testing::TempDir t;
  OwnerControls c;
  c.check_interval_s = 3600;  // only SetPaused re-evaluates
  StatusBoard board;
  HandBack hand_back;
  {
    OwnerGate gate(c, std::unique_ptr<OwnerReadingSource>(new FakeReadings()), t / "owner.json",
                   &board, &hand_back, 20);
    REQUIRE(gate.Start().ok());
    Result<Json> j = ParseJson(gate.HandleCommand("pause"));
    REQUIRE(j.ok());
    CHECK((*j)["paused"] == true);
    CHECK_FALSE(gate.decision().allowed);  // at once, not at the next interval
    CHECK(hand_back.requested());
    CHECK(hand_back.reason().find("paused by the owner") == 0);
    Result<Json> s = ParseJson(gate.HandleCommand("status"));
    REQUIRE(s.ok());
    CHECK((*s)["paused"] == true);
    CHECK((*s)["state"] == "not working");
    Result<Json> e = ParseJson(gate.HandleCommand("reboot"));
    REQUIRE(e.ok());
    CHECK((*e)["error"] == "unknown command 'reboot'");
  }
  struct stat st;
  REQUIRE(stat((t / "owner.json").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  {
    // A restart stays paused until resume.
    OwnerGate gate(c, std::unique_ptr<OwnerReadingSource>(new FakeReadings()), t / "owner.json",
                   &board, &hand_back, 20);
    REQUIRE(gate.Start().ok());
    CHECK(gate.paused());
    CHECK_FALSE(gate.decision().allowed);
    gate.HandleCommand("resume");
    CHECK(gate.decision().allowed);
  }
  OwnerGate gate(c, std::unique_ptr<OwnerReadingSource>(new FakeReadings()), t / "owner.json",
                 &board, &hand_back, 20);
  REQUIRE(gate.Start().ok());
  CHECK_FALSE(gate.paused());
}

TEST_CASE("status board: job progress, ETA, checkpoint, durable lifetime counters", "[owner]") {
  testing::TempDir t;
  {
    StatusBoard b;
    REQUIRE(b.AttachLifetime(t / "lifetime.json").ok());
    b.SetNode("n_1");
    CHECK(b.Snapshot()["job"].is_null());
    CHECK(b.Snapshot()["state"] == "idle");
    b.JobStarted("j_1", 3, 100, 20);
    b.TrainerStarted();
    b.Progress(20, -1);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    b.Progress(30, 25);
    Json s = b.Snapshot();
    CHECK(s["state"] == "working");
    CHECK(s["job"]["step"] == 30);
    CHECK(s["job"]["steps"] == 100);
    CHECK(s["job"]["eta_s"].is_number());
    CHECK(s["last_checkpoint"]["step"] == 25);
    CHECK(s["last_checkpoint"]["job"] == "j_1");
    std::string text = FormatStatus(s);
    CHECK(text.find("job: j_1 (lease 3), step 30/100, ETA") != std::string::npos);
    CHECK(text.find("last checkpoint uploaded: j_1 step 25") != std::string::npos);
    b.TrainerStopped();
    b.JobEnded(true);
    b.JobStarted("j_2", 1, 10, 0);
    b.JobEnded(false);
    CHECK(b.Snapshot()["lifetime"]["jobs"] == 2);
  }
  StatusBoard again;
  REQUIRE(again.AttachLifetime(t / "lifetime.json").ok());
  Json s = again.Snapshot();
  CHECK(s["lifetime"]["jobs"] == 2);
  CHECK(s["lifetime"]["jobs_completed"] == 1);
  CHECK(s["lifetime"]["gpu_hours"].get<double>() > 0);
  CHECK(FormatStatus(s).find("lifetime: 2 jobs (1 completed)") != std::string::npos);
  REQUIRE(files::WriteDurable(t / "bad.json", "{\"jobs\": -1}").ok());
  StatusBoard bad;
  CHECK_FALSE(bad.AttachLifetime(t / "bad.json").ok());

  CHECK(*EstimateEtaSeconds(0, 0, 50, 10, 100) == Approx(10));
  CHECK_FALSE(EstimateEtaSeconds(50, 0, 50, 10, 100).has_value());
}

TEST_CASE("readings: processes from a /proc-like tree", "[owner]") {
  testing::TempDir t;
  REQUIRE(files::MakeDirs(t / "123").ok());
  REQUIRE(files::MakeDirs(t / "456").ok());
  REQUIRE(files::MakeDirs(t / "self").ok());
  REQUIRE(files::WriteDurable(t / "123/comm", "fakegame\n").ok());
  REQUIRE(files::WriteDurable(t / "123/cmdline", std::string("/opt/g/fakegame\0--x\0", 20)).ok());
  REQUIRE(files::WriteDurable(t / "456/comm", "kworker/0:1\n").ok());
  REQUIRE(files::WriteDurable(t / "self/comm", "ignored\n").ok());
  std::vector<ProcessName> ps = ListProcesses(t.path());
  REQUIRE(ps.size() == 2);
  bool found = false;
  for (const ProcessName& p : ps) {
    if (p.comm == "fakegame") {
      found = true;
      CHECK(p.argv0 == "fakegame");
    }
  }
  CHECK(found);
  // The real /proc lists this test.
  bool me = false;
  for (const ProcessName& p : ListProcesses()) me = me || p.argv0 == "agent_tests";
  CHECK(me);
}

TEST_CASE("readings: logind idle hint and device times", "[owner]") {
  CHECK(*ParseLogindIdle("IdleHint=yes\nIdleSinceHintMonotonic=1000000\n", 61000000) == 60);
  CHECK(*ParseLogindIdle("IdleHint=no\nIdleSinceHintMonotonic=1000000\n", 61000000) == 0);
  CHECK_FALSE(ParseLogindIdle("IdleHint=no\nIdleSinceHintMonotonic=0\n", 5).has_value());
  CHECK_FALSE(ParseLogindIdle("", 5).has_value());
  CHECK_FALSE(ParseLogindIdle("IdleHint=maybe\nIdleSinceHintMonotonic=9\n", 50).has_value());

  testing::TempDir t;
  REQUIRE(files::WriteDurable(t / "event0", "").ok());
  REQUIRE(files::WriteDurable(t / "event1", "").ok());
  struct timespec times[2] = {{1000, 0}, {1000, 0}};
  REQUIRE(utimensat(AT_FDCWD, (t / "event0").c_str(), times, 0) == 0);
  times[0].tv_sec = 1900;  // atime: input read
  REQUIRE(utimensat(AT_FDCWD, (t / "event1").c_str(), times, 0) == 0);
  CHECK(*IdleFromDeviceTimes({t / "event*"}, 2000) == 100);
  CHECK_FALSE(IdleFromDeviceTimes({t / "nothing*"}, 2000).has_value());
}

TEST_CASE("control socket: owner-only, one line each way, stale and busy paths", "[owner]") {
  testing::TempDir t;
  std::string path = t / "control.sock";
  {
    ControlServer server;
    REQUIRE(
        server.Start(path, [](const std::string& c) { return "{\"echo\":\"" + c + "\"}"; }).ok());
    struct stat st;
    REQUIRE(stat(path.c_str(), &st) == 0);
    CHECK(S_ISSOCK(st.st_mode));
    CHECK((st.st_mode & 0777) == 0600);
    Result<std::string> a = ControlRequest(path, "status");
    REQUIRE(a.ok());
    CHECK(*a == "{\"echo\":\"status\"}");
    ControlServer second;
    Status busy = second.Start(path, [](const std::string&) { return ""; });
    CHECK(busy.code() == Code::kConflict);
    CHECK(ControlRequest(path, "pause").ok());  // the first server still serves
  }
  Result<std::string> gone = ControlRequest(path, "status");
  REQUIRE_FALSE(gone.ok());
  CHECK(gone.status().code() == Code::kUnavailable);
  CHECK(gone.status().message().find("no agent is running") == 0);

  // A socket left behind by a killed agent is replaced.
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr;
  std::memset(&addr, 0, sizeof addr);
  addr.sun_family = AF_UNIX;
  std::strcpy(addr.sun_path, path.c_str());
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  close(fd);
  ControlServer server;
  REQUIRE(server.Start(path, [](const std::string&) { return "{}"; }).ok());
  CHECK(ControlRequest(path, "x").ok());
  ControlServer other;
  CHECK_FALSE(other.Start(t.path() + "/" + std::string(120, 'a'), nullptr).ok());
}
