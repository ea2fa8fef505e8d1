// A child process with its stdout and stderr delivered line by line to callbacks.
//
// Contract: Start() forks and execs argv (argv[0] is a path); the child gets PR_SET_PDEATHSIG
// SIGKILL so it never outlives this process, its own process group, and stdin from /dev/null.
// Two reader threads call on_stdout / on_stderr with each line (without "\n"; long lines are cut
// at 64 KiB); a waiter thread reaps the child. Callbacks run on those threads and must be
// thread-safe. The destructor kills the child (SIGKILL) if it is still running and joins all
// threads. Methods are thread-safe.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "shared/status.h"

namespace gleaner::agent {

// Resource limits set in the child before exec (setrlimit; 0 = leave as inherited).
struct ChildLimits {
  int64_t data_bytes = 0;     // RLIMIT_DATA: heap and private writable mappings
  int64_t max_processes = 0;  // RLIMIT_NPROC (per user; not enforced for root)
};

class ChildProcess {
 public:
  using LineCallback = std::function<void(const std::string& line)>;

  // env: the child's whole environment ("NAME=value"); nullptr: this process's. limits: set in
  // the child before exec (nullptr: none); one that cannot be set fails the child (exit 127).
  static Result<std::unique_ptr<ChildProcess>> Start(const std::vector<std::string>& argv,
                                                     LineCallback on_stdout, LineCallback on_stderr,
                                                     const std::vector<std::string>* env = nullptr,
                                                     const ChildLimits* limits = nullptr);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  // Sends sig to the child if it has not been reaped yet.
  void Signal(int sig);
  // Waits until the child has exited and both output streams are drained, at most timeout_ms
  // (< 0: forever). True when it has; *wait_status gets the waitpid status.
  bool WaitFor(int timeout_ms, int* wait_status);
  bool Exited();

 private:
  ChildProcess() = default;
  void ReadLoop(int fd, const LineCallback& cb);

  pid_t pid_ = -1;
  std::mutex mu_;
  std::condition_variable cv_;
  bool reaped_ = false;
  int streams_open_ = 2;
  int status_ = 0;
  LineCallback on_stdout_, on_stderr_;
  std::thread out_thread_, err_thread_, wait_thread_;
};

// "exit 2", "signal 6 (Aborted)": a waitpid status for humans.
std::string DescribeWaitStatus(int wait_status);

}  // namespace gleaner::agent
