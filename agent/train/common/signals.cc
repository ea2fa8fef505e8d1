#include "agent/train/common/signals.h"

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>

namespace gleaner::train {
namespace {

volatile std::sig_atomic_t g_stop = 0;

void OnStopSignal(int) {
  g_stop = 1;
}

}  // namespace

void InstallStopHandlers() {
  struct sigaction sa = {};
  sa.sa_handler = OnStopSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() == 1) _exit(137);  // the parent died before we asked
}

bool StopRequested() {
  return g_stop != 0;
}

void RequestStop() {
  g_stop = 1;
}

}  // namespace gleaner::train
