#include "agent/supervisor/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

namespace gleaner::agent {

Result<std::unique_ptr<ChildProcess>> ChildProcess::Start(const std::vector<std::string>& argv,
                                                          LineCallback on_stdout,
                                                          LineCallback on_stderr,
                                                          const std::vector<std::string>* env,
                                                          const ChildLimits* limits) {
  if (argv.empty()) return Status::Invalid("empty command line");
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0) return Status::Io(std::string("pipe: ") + strerror(errno));
  if (pipe2(err, O_CLOEXEC) != 0) {
    close(out[0]);
    close(out[1]);
    return Status::Io(std::string("pipe: ") + strerror(errno));
  }
  std::vector<char*> cargv;
  for (const std::string& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  std::vector<char*> cenv;
  if (env != nullptr) {
    for (const std::string& e : *env) cenv.push_back(const_cast<char*>(e.c_str()));
    cenv.push_back(nullptr);
  }
  const ChildLimits lim = limits != nullptr ? *limits : ChildLimits();
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    for (int fd : {out[0], out[1], err[0], err[1]}) close(fd);
    return Status::Io(std::string("fork: ") + strerror(errno));
  }
  if (pid == 0) {
    // Child: only async-signal-safe calls until exec.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    setpgid(0, 0);
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, 0);
    dup2(out[1], 1);
    dup2(err[1], 2);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
    // Hard ceilings (setrlimit is async-signal-safe); soft = hard so the child cannot raise them.
    const struct {
      int resource;
      int64_t value;
    } caps[] = {{RLIMIT_DATA, lim.data_bytes}, {RLIMIT_NPROC, lim.max_processes}};
    for (const auto& cap : caps) {
      if (cap.value <= 0) continue;
      struct rlimit rl;
      if (getrlimit(cap.resource, &rl) != 0) rl.rlim_max = RLIM_INFINITY;
      // Never above the inherited hard limit (raising it needs privileges).
      if (rl.rlim_max == RLIM_INFINITY || rlim_t(cap.value) < rl.rlim_max) {
        rl.rlim_max = rlim_t(cap.value);
      }
      if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > rl.rlim_max) rl.rlim_cur = rl.rlim_max;
      if (setrlimit(cap.resource, &rl) != 0) {
        const char msg[] = "cannot set the trainer's resource limits\n";
        ssize_t ignored = write(2, msg, sizeof msg - 1);
        (void)ignored;
        _exit(127);
      }
    }
    if (env != nullptr) {
      execve(cargv[0], cargv.data(), cenv.data());
    } else {
      execv(cargv[0], cargv.data());
    }
    const char msg[] = "exec failed\n";
    ssize_t ignored = write(2, msg, sizeof msg - 1);
    (void)ignored;
    _exit(127);
  }
  close(out[1]);
  close(err[1]);
  std::unique_ptr<ChildProcess> p(new ChildProcess());
  p->pid_ = pid;
  p->on_stdout_ = std::move(on_stdout);
  p->on_stderr_ = std::move(on_stderr);
  ChildProcess* self = p.get();
  int out_fd = out[0], err_fd = err[0];
  p->out_thread_ = std::thread([self, out_fd] { self->ReadLoop(out_fd, self->on_stdout_); });
  p->err_thread_ = std::thread([self, err_fd] { self->ReadLoop(err_fd, self->on_stderr_); });
  p->wait_thread_ = std::thread([self] {
    int st = 0;
    while (waitpid(self->pid_, &st, 0) < 0 && errno == EINTR) {
    }
    std::lock_guard<std::mutex> lock(self->mu_);
    self->status_ = st;
    self->reaped_ = true;
    self->cv_.notify_all();
  });
  return p;
}

void ChildProcess::ReadLoop(int fd, const LineCallback& cb) {
  std::string buf;
  char chunk[4096];
  for (;;) {
    ssize_t n = read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    buf.append(chunk, size_t(n));
    size_t nl;
    while ((nl = buf.find('\n')) != std::string::npos) {
      if (cb) cb(buf.substr(0, nl));
      buf.erase(0, nl + 1);
    }
    if (buf.size() > 65536) {
      if (cb) cb(buf.substr(0, 65536));
      buf.clear();
    }
  }
  if (!buf.empty() && cb) cb(buf);
  close(fd);
  std::lock_guard<std::mutex> lock(mu_);
  --streams_open_;
  cv_.notify_all();
}

void ChildProcess::Signal(int sig) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!reaped_) kill(pid_, sig);
}

bool ChildProcess::WaitFor(int timeout_ms, int* wait_status) {
  std::unique_lock<std::mutex> lock(mu_);
  auto done = [this] { return reaped_ && streams_open_ == 0; };
  if (timeout_ms < 0) {
    cv_.wait(lock, done);
  } else if (!cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), done)) {
    return false;
  }
  if (wait_status != nullptr) *wait_status = status_;
  return true;
}

bool ChildProcess::Exited() {
  std::lock_guard<std::mutex> lock(mu_);
  return reaped_;
}

ChildProcess::~ChildProcess() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!reaped_) kill(pid_, SIGKILL);
  }
  if (wait_thread_.joinable()) wait_thread_.join();
  if (out_thread_.joinable()) out_thread_.join();
  if (err_thread_.joinable()) err_thread_.join();
}

std::string DescribeWaitStatus(int st) {
  if (WIFEXITED(st)) return "exit " + std::to_string(WEXITSTATUS(st));
  if (WIFSIGNALED(st)) {
    return "signal " + std::to_string(WTERMSIG(st)) + " (" + strsignal(WTERMSIG(st)) + ")";
  }
  return "status " + std::to_string(st);
}

}  // namespace gleaner::agent
