// Owner controls end to end: a real coordinator, agent and trainer; `gleaner-agent status |
// pause | resume` as separate processes over the control socket; a fake game that pauses work.
#include <dirent.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <fstream>

#include "tests/integration/agent_fleet.h"

using namespace gleaner;
using namespace gleaner::testing;

namespace {

struct CliResult {
  ExitStatus status;
  std::string out, err;
};

CliResult Cli(const std::string& dir, std::vector<std::string> args) {
  static int n = 0;
  ProcessSpec spec;
  spec.binary = "gleaner-agent";
  spec.args = std::move(args);
  spec.unset_env = {"GLEANER_STATE_DIR"};
  spec.stdout_path = dir + "/cli-" + std::to_string(++n) + ".out";
  spec.stderr_path = dir + "/cli-" + std::to_string(n) + ".err";
  Process p(spec);
  CliResult r;
  std::string error;
  if (!p.Start(&error)) {
    r.err = error;
    return r;
  }
  std::optional<ExitStatus> st = p.Wait(Millis(60000));
  if (st) r.status = *st;
  r.out = p.Stdout();
  r.err = p.Stderr();
  return r;
}

Json StatusJson(const std::string& dir, const std::string& state_dir) {
  CliResult r = Cli(dir, {"status", "--json", "--state-dir", state_dir});
  return Json::parse(r.out, nullptr, false);
}

// The value of `name` in the environment of the agent's trainer child ("" when not found).
std::string TrainerEnv(pid_t agent, const std::string& name) {
  DIR* d = opendir("/proc");
  std::string value;
  while (struct dirent* e = d ? readdir(d) : nullptr) {
    std::string pid = e->d_name;
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string stat = ReadFile("/proc/" + pid + "/stat");
    size_t close = stat.rfind(')');
    if (close == std::string::npos || stat.find("(gleaner-train)") == std::string::npos) continue;
    long ppid = std::atol(stat.c_str() + close + 4);  // ") S <ppid>"
    if (ppid != agent) continue;
    std::string env = ReadFile("/proc/" + pid + "/environ");
    size_t pos = 0;
    while (pos < env.size()) {
      size_t end = env.find('\0', pos);
      if (end == std::string::npos) end = env.size();
      std::string kv = env.substr(pos, end - pos);
      if (kv.rfind(name + "=", 0) == 0) value = kv.substr(name.size() + 1);
      pos = end + 1;
    }
  }
  if (d) closedir(d);
  return value;
}

}  // namespace

TEST_CASE("status pause and resume talk to the running agent over the control socket",
          "[agent][e2e][owner]") {
  TempDir dir("gleaner-e2e-owner");
  Fleet fleet(dir.path());
  REQUIRE(fleet.ok());
  std::string state_dir = dir.File("a");

  CliResult none = Cli(dir.path(), {"status", "--state-dir", state_dir});
  CHECK(none.status.exited);
  CHECK(none.status.code == 1);
  CHECK(none.err.find("gleaner-agent: no agent is running") == 0);
  CHECK(Cli(dir.path(), {"status", "--bogus"}).status.code == 64);

  std::string a_job =
      fleet.Submit({{"seed", 4}, {"steps", 600}, {"step_ms", 10}, {"checkpoint_every", 20}});
  REQUIRE(!a_job.empty());
  AgentProcess& a = fleet.AddAgent("a", {}, {"--owner-check-interval", "0.1"});
  std::string error;
  REQUIRE(a.Start(&error));
  INFO(a.Log());
  REQUIRE(WaitUntil([&] { return fleet.Job(a_job).value("step", 0) >= 60; }, Millis(30000),
                    Millis(20)));

  CliResult st = Cli(dir.path(), {"status", "--state-dir", state_dir});
  INFO(st.out << st.err);
  CHECK(st.status.clean());
  CHECK(st.out.find("state: working") == 0);
  CHECK(st.out.find("job: " + a_job + " (lease 1), step ") != std::string::npos);
  CHECK(st.out.find("/600") != std::string::npos);
  CHECK(st.out.find("last checkpoint uploaded: " + a_job + " step ") != std::string::npos);
  REQUIRE(WriteFile(dir.File("agent.conf"), "# owner's config\nstate-dir = " + state_dir + "\n"));
  CliResult by_config = Cli(dir.path(), {"status", "--config", dir.File("agent.conf")});
  CHECK(by_config.status.clean());
  CHECK(by_config.out.find("job: " + a_job) != std::string::npos);
  Json js = StatusJson(dir.path(), state_dir);
  REQUIRE(js.is_object());
  CHECK(js["job"]["id"] == a_job);
  CHECK(js["node_id"] == a.NodeId());
  CHECK(js["paused"] == false);

  // Pause: the job comes back to the queue with a committed checkpoint; no more work is taken.
  CliResult p = Cli(dir.path(), {"pause", "--state-dir", state_dir});
  INFO(p.out << p.err);
  CHECK(p.status.clean());
  CHECK(p.out.find("paused\nstate: not working (paused by the owner") == 0);
  Json job = fleet.Job(a_job);
  CHECK(job.value("state", "") == "pending");
  REQUIRE(job["latest_checkpoint"].is_object());
  int64_t ckpt = job["latest_checkpoint"].value("step", 0);
  CHECK(ckpt >= 60);
  CHECK(a.Log().find("released at step") != std::string::npos);
  std::string b_job = fleet.Submit({{"seed", 5}, {"steps", 20}});
  REQUIRE(!b_job.empty());
  // Nothing is claimed while paused (the agent polls the gate every 0.1 s).
  CHECK_FALSE(WaitUntil(
      [&] {
        return fleet.Job(a_job).value("state", "") != "pending" ||
               fleet.Job(b_job).value("state", "") != "pending";
      },
      Millis(1500), Millis(50)));
  CHECK(StatusJson(dir.path(), state_dir)["paused"] == true);

  CliResult r = Cli(dir.path(), {"resume", "--state-dir", state_dir});
  CHECK(r.status.clean());
  CHECK(r.out.find("resumed\n") == 0);
  REQUIRE(fleet.WaitAllFinal({a_job, b_job}, Millis(60000)));
  CHECK(fleet.ResultChain(a_job) == ExpectedChain(4, 600) + "\n");
  CHECK(fleet.ResultChain(b_job) == ExpectedChain(5, 20) + "\n");
  CHECK(a.Log().find("resuming from checkpoint step " + std::to_string(ckpt)) != std::string::npos);
  Json life = StatusJson(dir.path(), state_dir)["lifetime"];
  CHECK(life["jobs"] == 3);  // a (handed back), a again, b
  CHECK(life["jobs_completed"] == 2);
  CHECK(life["gpu_hours"].get<double>() > 0);
  CHECK(a.process().Stop(Millis(5000)).clean());

  // The counters survive a restart.
  REQUIRE(a.Start(&error));
  REQUIRE(WaitUntil([&] { return StatusJson(dir.path(), state_dir).is_object(); }, Millis(10000),
                    Millis(50)));
  CHECK(StatusJson(dir.path(), state_dir)["lifetime"]["jobs"] == 3);
}

TEST_CASE("a named program running pauses the agent and it works again once it exits",
          "[agent][e2e][owner]") {
  TempDir dir("gleaner-e2e-game");
  Fleet fleet(dir.path());
  REQUIRE(fleet.ok());
  std::string game = dir.File("fakegame");
  {
    std::ifstream in("/bin/sleep", std::ios::binary);
    std::ofstream out(game, std::ios::binary);
    out << in.rdbuf();
  }
  REQUIRE(::chmod(game.c_str(), 0755) == 0);
  std::string id =
      fleet.Submit({{"seed", 6}, {"steps", 600}, {"step_ms", 10}, {"checkpoint_every", 20}});
  REQUIRE(!id.empty());
  AgentProcess& a = fleet.AddAgent(
      "a", {},
      {"--pause-programs", "steam,fakegame", "--owner-check-interval", "0.1", "--gpus", "1"});
  std::string error;
  REQUIRE(a.Start(&error));
  INFO(a.Log());
  REQUIRE(
      WaitUntil([&] { return fleet.Job(id).value("step", 0) >= 40; }, Millis(30000), Millis(20)));
  // The trainer sees only the selected GPU.
  CHECK(TrainerEnv(a.process().pid(), "CUDA_VISIBLE_DEVICES") == "1");

  ProcessSpec gs;
  gs.binary = game;
  gs.args = {"60"};
  Process g(gs);
  REQUIRE(g.Start(&error));
  REQUIRE(WaitUntil([&] { return fleet.Job(id).value("state", "") == "pending"; }, Millis(20000),
                    Millis(20)));
  CHECK(fleet.Job(id)["latest_checkpoint"].is_object());
  CHECK(a.Log().find("not working: program 'fakegame' is running") != std::string::npos);
  Json s = StatusJson(dir.path(), dir.File("a"));
  CHECK(s["state"] == "not working");
  CHECK(s["reason"] == "program 'fakegame' is running");
  CHECK(s["paused"] == false);
  CHECK_FALSE(WaitUntil([&] { return fleet.Job(id).value("state", "") != "pending"; }, Millis(1000),
                        Millis(50)));

  g.Kill();
  REQUIRE(fleet.WaitAllFinal({id}, Millis(60000)));
  CHECK(fleet.ResultChain(id) == ExpectedChain(6, 600) + "\n");
  CHECK(a.Log().find("owner controls: work allowed") != std::string::npos);
}

TEST_CASE("outside the configured work hours the agent takes no work and says why",
          "[agent][e2e][owner]") {
  TempDir dir("gleaner-e2e-hours");
  Fleet fleet(dir.path());
  REQUIRE(fleet.ok());
  // A one-minute window twelve hours from now (local time, as the agent reads it).
  time_t now = time(nullptr);
  struct tm lt;
  localtime_r(&now, &lt);
  int start = (lt.tm_hour * 60 + lt.tm_min + 720) % 1440;
  char window[32];
  std::snprintf(window, sizeof window, "%02d:%02d-%02d:%02d", start / 60, start % 60,
                (start + 1) / 60 % 24, (start + 1) % 60);
  std::string id = fleet.Submit({{"seed", 7}, {"steps", 5}});
  REQUIRE(!id.empty());
  AgentProcess& a = fleet.AddAgent("a", {}, {"--work-hours", window});
  std::string error;
  REQUIRE(a.Start(&error));
  INFO(a.Log());
  REQUIRE(WaitUntil([&] { return StatusJson(dir.path(), dir.File("a")).is_object(); },
                    Millis(10000), Millis(50)));
  Json s = StatusJson(dir.path(), dir.File("a"));
  CHECK(s["state"] == "not working");
  CHECK(s["reason"] == std::string("outside work hours (") + window + ")");
  CHECK_FALSE(WaitUntil([&] { return fleet.Job(id).value("state", "") != "pending"; }, Millis(1000),
                        Millis(50)));
  CHECK(a.process().Stop(Millis(5000)).clean());  // SIGTERM while waiting: a prompt, clean exit
}
