// gleaner-agent: the supervisor on a volunteer PC (see docs/agent.md). `gleaner-agent status |
// pause | resume` instead talk to the running agent over its control socket (control_cli.h).
//
// Signals: SIGTERM/SIGINT are blocked in every thread and taken by one signal thread. The first
// asks the agent to hand its job back (trainer checkpoints, upload + commit, release) and exit 0
// within --shutdown-deadline; a second signal, or the deadline passing, exits at once.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <thread>

#include "agent/supervisor/agent.h"
#include "agent/supervisor/config.h"
#include "agent/supervisor/control_cli.h"
#include "agent/supervisor/curl_http.h"
#include "agent/supervisor/log.h"

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

  CurlHttpClient http(CurlOptions{config->ca_file});
  int rc = RunAgent(*config, &http, &shutdown);
  std::fflush(nullptr);
  _exit(rc);  // the signal thread may still be waiting; do not run static destructors under it
}
