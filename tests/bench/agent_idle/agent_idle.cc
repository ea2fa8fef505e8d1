// bench_agent_idle: starts a coordinator with an empty queue and one gleaner-agent, lets the
// agent poll for work, and reports its resident memory and CPU use from /proc.
//   bench_agent_idle [SECONDS (20)] [RETRY_AFTER_S (5)]
// Output: one JSON line {"seconds","polls","rss_kb","cpu_percent","cpu_ms"}.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "tests/integration/coordinator_fixture.h"
#include "tests/integration/harness.h"

using gleaner::Json;
using namespace gleaner::testing;

namespace {

long long RssKb(pid_t pid) {
  std::string status = ReadFile("/proc/" + std::to_string(pid) + "/status");
  size_t at = status.find("VmRSS:");
  return at == std::string::npos ? -1 : std::atoll(status.c_str() + at + 6);
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = argc > 1 ? std::atof(argv[1]) : 20;
  std::string retry_after = argc > 2 ? argv[2] : "5";
  TempDir dir("gleaner-bench-idle");
  CoordinatorOptions o;
  o.heartbeat_interval_s = 30;
  o.maintenance_period_s = 60;
  o.extra_args = {"--retry-after", retry_after};
  CoordinatorProcess coord(dir.path(), o);
  std::string error;
  if (!coord.Start(&error)) {
    std::fprintf(stderr, "coordinator: %s\n", error.c_str());
    return 1;
  }
  HttpResult enroll =
      coord.OperatorClient().Post("/v1/keys", Json{{"role", "enroll"}, {"name", "b"}});
  if (enroll.status != 201) {
    std::fprintf(stderr, "enroll key: %s\n", enroll.Describe().c_str());
    return 1;
  }
  ProcessSpec spec;
  spec.binary = "gleaner-agent";
  spec.args = {"--coordinator",  coord.url(),
               "--enroll-token", enroll.json()["token"].get<std::string>(),
               "--state-dir",    dir.File("agent")};
  spec.env = {{"GLEANER_MACHINE_ID", "bench-idle"}};
  spec.stderr_path = dir.File("agent.log");
  Process agent(spec);
  if (!agent.Start(&error)) {
    std::fprintf(stderr, "agent: %s\n", error.c_str());
    return 1;
  }
  // Let it register and settle, then measure.
  WaitUntil([&] { return ReadFile(dir.File("agent/identity.json")).size() > 0; }, Millis(10000));
  usleep(500000);
  long long t0 = CpuTicks(agent.pid());
  usleep(useconds_t(seconds * 1e6));
  long long t1 = CpuTicks(agent.pid());
  long long rss = RssKb(agent.pid());
  double cpu_ms = double(t1 - t0) * 1000.0 / double(sysconf(_SC_CLK_TCK));
  std::string log = coord.process().Stderr();
  size_t polls = 0;
  for (size_t at = log.find("/v1/work"); at != std::string::npos;
       at = log.find("/v1/work", at + 1)) {
    ++polls;
  }
  std::printf(
      "{\"seconds\":%.1f,\"retry_after_s\":%s,\"polls\":%zu,\"rss_kb\":%lld,\"cpu_ms\":%.1f,"
      "\"cpu_percent\":%.4f}\n",
      seconds, retry_after.c_str(), polls, rss, cpu_ms, cpu_ms / (seconds * 10.0));
  agent.Stop();
  return 0;
}
