// Owner controls as a pure decision: every control with literal readings (no clock, no /proc).
#include "agent/supervisor/owner_policy.h"

#include <catch2/catch.hpp>
#include <vector>

#include "agent/supervisor/config.h"
#include "shared/native/files.h"
#include "test_util.h"

using namespace gleaner;
using namespace gleaner::agent;

namespace {

constexpr int kSun = 0, kMon = 1, kFri = 5, kSat = 6;
int At(int h, int m) {
  return h * 60 + m;
}

OwnerReadings Now(int weekday, int minute) {
  OwnerReadings r;
  r.weekday = weekday;
  r.minute_of_day = minute;
  return r;
}

OwnerControls Parsed(std::map<std::string, std::string> values) {
  OwnerControls c;
  Status s = ParseOwnerControls(values, &c);
  INFO(s.ToString());
  REQUIRE(s.ok());
  return c;
}

}  // namespace

TEST_CASE("work hours: a window crossing midnight covers both sides of it", "[owner]") {
  auto w = ParseTimeWindows("22:00-07:00");
  REQUIRE(w.ok());
  CHECK(InWindows(*w, kMon, At(23, 30)));
  CHECK(InWindows(*w, kMon, At(0, 0)));
  CHECK(InWindows(*w, kMon, At(6, 59)));
  CHECK_FALSE(InWindows(*w, kMon, At(7, 0)));
  CHECK_FALSE(InWindows(*w, kMon, At(12, 0)));
  CHECK_FALSE(InWindows(*w, kMon, At(21, 59)));
  CHECK(InWindows(*w, kMon, At(22, 0)));
}

TEST_CASE("work hours: days, day ranges that wrap, several windows", "[owner]") {
  auto w = ParseTimeWindows("Mon-Fri 22:00-07:00, Sat-Sun 00:00-24:00");
  REQUIRE(w.ok());
  REQUIRE(w->size() == 2);
  // Friday night runs into Saturday morning (the window belongs to Friday).
  CHECK(InWindows(*w, kFri, At(23, 0)));
  CHECK(InWindows(*w, kSat, At(3, 0)));
  CHECK(InWindows(*w, kSat, At(15, 0)));  // weekend: all day
  CHECK(InWindows(*w, kSun, At(23, 59)));
  // Sunday is not in Mon-Fri: Monday 03:00 is outside (Sunday's night window does not exist).
  CHECK_FALSE(InWindows(*w, kMon, At(3, 0)));
  CHECK_FALSE(InWindows(*w, kMon, At(12, 0)));
  CHECK(InWindows(*w, 2, At(3, 0)));  // Tuesday 03:00: Monday night

  auto wrap = ParseTimeWindows("Fri-Mon 09:00-17:00");
  REQUIRE(wrap.ok());
  CHECK(InWindows(*wrap, kSun, At(10, 0)));
  CHECK(InWindows(*wrap, kMon, At(10, 0)));
  CHECK_FALSE(InWindows(*wrap, 3, At(10, 0)));
  CHECK_FALSE(InWindows(*wrap, kFri, At(17, 0)));

  auto until_midnight = ParseTimeWindows("sat 18:00-00:00");
  REQUIRE(until_midnight.ok());
  CHECK(InWindows(*until_midnight, kSat, At(23, 59)));
  CHECK_FALSE(InWindows(*until_midnight, kSun, At(0, 1)));
  CHECK(InWindows({}, kMon, At(12, 0)));  // no windows: any time
}

TEST_CASE("work hours: bad text is refused with a readable message", "[owner]") {
  for (const char* bad : {"", "22-07", "25:00-01:00", "10:00-10:00", "Mon-Xyz 01:00-02:00",
                          "12:60-13:00", "24:00-01:00", "Mon 01:00-02:00,", "9:00-10:00"}) {
    INFO(bad);
    auto w = ParseTimeWindows(bad);
    REQUIRE_FALSE(w.ok());
    CHECK(w.status().message().find("work hours") != std::string::npos);
  }
}

TEST_CASE("policy: outside work hours is not allowed, with the configured text", "[owner]") {
  OwnerPolicy p(Parsed({{"work-hours", "Mon-Fri 22:00-07:00"}}));
  CHECK(p.Evaluate(Now(kMon, At(23, 0))).allowed);
  OwnerDecision d = p.Evaluate(Now(kMon, At(12, 0)));
  CHECK_FALSE(d.allowed);
  CHECK(d.reason == "outside work hours (Mon-Fri 22:00-07:00)");
}

TEST_CASE("policy: a named program pauses work while it runs", "[owner]") {
  OwnerPolicy p(Parsed({{"pause-programs", "steam, EldenRing.exe,a-very-long-game-binary"}}));
  OwnerReadings r = Now(kMon, 0);
  r.processes = {{"bash", "bash"}, {"sleep", "sleep"}};
  CHECK(p.Evaluate(r).allowed);
  r.processes.push_back({"eldenring.exe", "eldenring.exe"});  // case-insensitive
  OwnerDecision d = p.Evaluate(r);
  CHECK_FALSE(d.allowed);
  CHECK(d.reason == "program 'EldenRing.exe' is running");
  // comm is cut at 15 characters; argv[0] is matched whole.
  r.processes = {{"a-very-long-gam", "wrapper"}};
  CHECK_FALSE(p.Evaluate(r).allowed);
  r.processes = {{"python3", "steam"}};
  CHECK_FALSE(p.Evaluate(r).allowed);
  r.processes = {{"steamwebhelper", "steamwebhelper"}};  // not a prefix match
  CHECK(p.Evaluate(r).allowed);
  CHECK_FALSE(ParseProgramList("a,,b").ok());
  CHECK_FALSE(ParseProgramList("/usr/bin/steam").ok());
}

TEST_CASE("policy: GPU temperature pauses with hysteresis (no flapping)", "[owner]") {
  OwnerPolicy p(Parsed({{"max-gpu-temp", "80"}}));
  OwnerReadings r = Now(kMon, 0);
  std::vector<std::pair<double, bool>> seq = {
      {70, true},  {79.5, true},  {80, false}, {78, false},  // still hot: above 75
      {76, false}, {75.5, false}, {75, true},  {79, true},   // cooled to 75: allowed again
      {81, false}, {74, true}};
  for (auto [temp, allowed] : seq) {
    r.gpu_temp_c = temp;
    INFO("temp " << temp);
    OwnerDecision d = p.Evaluate(r);
    CHECK(d.allowed == allowed);
    if (!allowed) CHECK(d.reason.find("limit 80 C, resumes at 75 C") != std::string::npos);
  }
  // No reading (no NVML): the control is inactive.
  r.gpu_temp_c.reset();
  CHECK(p.Evaluate(r).allowed);
}

TEST_CASE("policy: the idle threshold", "[owner]") {
  OwnerPolicy p(Parsed({{"idle-minutes", "10"}}));
  OwnerReadings r = Now(kMon, 0);
  r.idle_s = 0;
  OwnerDecision d = p.Evaluate(r);
  CHECK_FALSE(d.allowed);
  CHECK(d.reason == "user active (idle 0 of 10 minutes)");
  r.idle_s = 599;
  CHECK_FALSE(p.Evaluate(r).allowed);
  r.idle_s = 600;
  CHECK(p.Evaluate(r).allowed);
  r.idle_s.reset();  // no idle source: inactive
  CHECK(p.Evaluate(r).allowed);
}

TEST_CASE("policy: the owner pause wins over everything and the order of reasons", "[owner]") {
  OwnerPolicy p(Parsed({{"work-hours", "22:00-07:00"}, {"pause-programs", "game"}}));
  OwnerReadings r = Now(kMon, At(12, 0));
  r.processes = {{"game", "game"}};
  r.paused = true;
  CHECK(p.Evaluate(r).reason.find("paused by the owner") == 0);
  r.paused = false;
  CHECK(p.Evaluate(r).reason.find("outside work hours") == 0);
  r.minute_of_day = At(23, 0);
  CHECK(p.Evaluate(r).reason == "program 'game' is running");
  r.processes.clear();
  CHECK(p.Evaluate(r).allowed);
  // Nothing configured: always allowed.
  OwnerPolicy none(OwnerControls{});
  CHECK(none.Evaluate(Now(kSat, At(3, 0))).allowed);
}

TEST_CASE("GPU selection by index or UUID becomes CUDA_VISIBLE_DEVICES", "[owner]") {
  auto g = ParseGpuList("0, 2");
  REQUIRE(g.ok());
  CHECK(CudaVisibleDevices(*g) == "0,2");
  auto u = ParseGpuList("GPU-5e3a0b1c-7d2e-4f60-9a8b-0c1d2e3f4a5b,1");
  REQUIRE(u.ok());
  CHECK(CudaVisibleDevices(*u) == "GPU-5e3a0b1c-7d2e-4f60-9a8b-0c1d2e3f4a5b,1");
  CHECK(ParseGpuList("MIG-5e3a0b1c-7d2e-4f60-9a8b-0c1d2e3f4a5b").ok());
  for (const char* bad : {"", "gpu0", "-1", "0;1", "GPU-", "GPU-xyz", "1,,2", "1234"}) {
    INFO(bad);
    auto r = ParseGpuList(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message().find("gpus:") == 0);
  }
  CHECK(CudaVisibleDevices({}).empty());
}

TEST_CASE("VRAM ceiling: the node advertises min(detected, ceiling)", "[owner]") {
  CHECK(AdvertisedVramMb(24576, 0) == 24576);
  CHECK(AdvertisedVramMb(24576, 8192) == 8192);
  CHECK(AdvertisedVramMb(6144, 8192) == 6144);
  CHECK(AdvertisedVramMb(0, 8192) == 0);  // no GPU stays no GPU
}

TEST_CASE("owner controls come from flags and the config file", "[owner][config]") {
  std::vector<std::string> args = {"--coordinator",
                                   "http://x:1",
                                   "--state-dir",
                                   "/s",
                                   "--gpus",
                                   "1,GPU-abc0",
                                   "--max-vram-mb",
                                   "8192",
                                   "--work-hours",
                                   "Sat-Sun 00:00-24:00",
                                   "--pause-programs",
                                   "steam,obs",
                                   "--max-gpu-temp",
                                   "83",
                                   "--idle-minutes",
                                   "15",
                                   "--owner-check-interval",
                                   "0.5"};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(&a[0]);
  Result<AgentConfig> c = ParseAgentConfig(int(argv.size()), argv.data());
  REQUIRE(c.ok());
  CHECK(c->owner.gpus == std::vector<std::string>{"1", "GPU-abc0"});
  CHECK(c->owner.max_vram_mb == 8192);
  CHECK(c->owner.work_hours.size() == 1);
  CHECK(c->owner.pause_programs == std::vector<std::string>{"steam", "obs"});
  CHECK(c->owner.max_gpu_temp_c == 83);
  CHECK(c->owner.min_idle_s == 900);
  CHECK(c->owner.check_interval_s == 0.5);

  for (auto bad : std::vector<std::pair<std::string, std::string>>{{"--max-gpu-temp", "500"},
                                                                   {"--work-hours", "soon"},
                                                                   {"--gpus", "all"},
                                                                   {"--idle-minutes", "-1"},
                                                                   {"--max-vram-mb", "lots"}}) {
    std::vector<std::string> a = {"--coordinator", "http://x:1", "--state-dir", "/s",
                                  bad.first,       bad.second};
    std::vector<char*> v;
    for (std::string& s : a) v.push_back(&s[0]);
    Result<AgentConfig> r = ParseAgentConfig(int(v.size()), v.data());
    INFO(bad.first << " " << bad.second);
    CHECK_FALSE(r.ok());
  }
}

TEST_CASE("owner controls in the config file and ReadConfigFile naming a bad line",
          "[owner][config]") {
  testing::TempDir t;
  REQUIRE(files::WriteSynced(t / "agent.conf",
                             "coordinator = http://c:1\nstate-dir = /s\n"
                             "work-hours = Mon-Fri 22:00-07:00, Sat-Sun 00:00-24:00\n"
                             "pause-programs = steam, obs\n")
              .ok());
  Result<std::map<std::string, std::string>> v = ReadConfigFile(t / "agent.conf");
  REQUIRE(v.ok());
  CHECK((*v)["state-dir"] == "/s");
  std::string conf = t / "agent.conf";
  std::vector<std::string> args = {"--config", conf, "--pause-programs", "game"};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(&a[0]);
  Result<AgentConfig> c = ParseAgentConfig(int(argv.size()), argv.data());
  REQUIRE(c.ok());
  CHECK(c->owner.work_hours.size() == 2);
  CHECK(c->owner.pause_programs == std::vector<std::string>{"game"});  // the flag wins

  REQUIRE(files::WriteSynced(t / "bad.conf", "state-dir = /s\nidle-minutes 5\n").ok());
  Result<std::map<std::string, std::string>> bad = ReadConfigFile(t / "bad.conf");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("config line 2") == 0);
}
