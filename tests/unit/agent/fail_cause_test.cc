// The job runner's attribution of a failed trainer: exit kExitFailed is the job's input,
// everything else (another code, a signal) is the node's.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "agent/protocol/trainer_protocol.h"
#include "agent/supervisor/job_runner.h"

using namespace gleaner::agent;

namespace {

// The waitpid status of a child that exits with `code` (or dies of `sig` when code < 0).
int StatusOf(int code, int sig = SIGKILL) {
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    if (code < 0) raise(sig);
    _exit(code);
  }
  int ws = 0;
  REQUIRE(waitpid(pid, &ws, 0) == pid);
  return ws;
}

}  // namespace

TEST_CASE("a trainer's end is attributed: exit 2 is the input, anything else the node",
          "[job_runner]") {
  CHECK(FailCauseOfExit(StatusOf(gleaner::kExitFailed)) == FailCause::kInput);
  CHECK(FailCauseOfExit(StatusOf(1)) == FailCause::kNode);
  CHECK(FailCauseOfExit(StatusOf(gleaner::kExitUsage)) == FailCause::kNode);
  CHECK(FailCauseOfExit(StatusOf(-1, SIGKILL)) == FailCause::kNode);
  CHECK(FailCauseOfExit(StatusOf(-1, SIGTERM)) == FailCause::kNode);
}
