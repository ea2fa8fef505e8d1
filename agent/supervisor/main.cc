// gleaner-agent: the supervisor on a volunteer PC (see docs/agent.md). `gleaner-agent status |
// pause | resume` instead talk to the running agent over its control socket (control_cli.h).
//
// Signals: SIGTERM/SIGINT are blocked in every thread and taken by one signal thread. The first
// asks the agent to hand its job back (trainer checkpoints, upload + commit, release) and exit 0
// within --shutdown-deadline; a second signal, or the deadline passing, exits at once.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

#include "agent/supervisor/agent.h"
#include "agent/supervisor/config.h"
#include "agent/supervisor/control_cli.h"
#include "agent/supervisor/log.h"
#include "agent/supervisor/self_test.h"
#include "agent/supervisor/self_update.h"
#include "shared/native/curl_http.h"

using namespace gleaner;
using namespace gleaner::agent;

int main(int argc, char** argv) {
  if (IsControlCommand(argc, argv)) return RunControlCommand(argc, argv);
  gleaner::Result<AgentConfig> config = ParseAgentConfig(argc - 1, argv + 1);
  if (!config.ok()) {
    if (config.status().code() == gleaner::Code::kNotFound) {
      std::fputs(AgentUsage(), stdout);
      return 0;
    }
    std::fprintf(stderr, "gleaner-agent: %s\n", config.status().message().c_str());
    return 64;
  }
#ifdef GLEANER_AGENT_VERSION
  config->version = GLEANER_AGENT_VERSION;  // a test build's version
#endif
  if (config->self_test) {
    net::CurlHttpClient http(net::CurlOptions{config->ca_file, config->allow_private_fetch});
    int rc = RunSelfTest(*config, &http);
    std::fflush(nullptr);
    return rc;
  }
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);

  ShutdownState shutdown;
  double deadline_s = config->shutdown_deadline_s;
  std::thread([set, &shutdown, deadline_s] {
    int sig = 0;
    sigwait(&set, &sig);
    shutdown.deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(deadline_s));
    Log("signal %d: handing back the current job, then exiting (deadline %.1fs)", sig, deadline_s);
    shutdown.stop.Request();
    struct timespec ts = {time_t(deadline_s),
                          long((deadline_s - double(time_t(deadline_s))) * 1e9)};
    siginfo_t info;
    if (sigtimedwait(&set, &info, &ts) > 0) {
      Log("second signal: exiting now");
      _exit(130);
    }
    Log("shutdown deadline passed: exiting now");
    _exit(1);
  }).detach();

  net::CurlHttpClient http(net::CurlOptions{config->ca_file, config->allow_private_fetch});
  gleaner::Result<std::unique_ptr<SelfUpdate>> updater =
      SelfUpdate::Create(*config, std::vector<std::string>(argv + 1, argv + argc), &http);
  if (!updater.ok()) {
    std::fprintf(stderr, "gleaner-agent: %s\n", updater.status().message().c_str());
    return 64;
  }
  Log("gleaner-agent %s starting", config->version.c_str());
  (*updater)->AtStart();
  int rc = RunAgent(*config, &http, &shutdown, [&](CoordinatorApi* api, bool after_job) {
    if (!shutdown.stop.requested()) (*updater)->BetweenJobs(api, after_job);
  });
  std::fflush(nullptr);
  _exit(rc);  // the signal thread may still be waiting; do not run static destructors under it
}
