// The black-box harness (harness.h): files, waiting, processes. The HTTP client is in
// http_client.cc, the only place here where cpp-httplib runs (its exceptions stay there).
#include "tests/integration/harness.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <set>
#include <sstream>
#include <thread>

extern char** environ;

namespace gleaner::testing {

// ---- files ---------------------------------------------------------------------------------

TempDir::TempDir(const std::string& prefix, const std::string& base) {
  const char* env = std::getenv("TMPDIR");
  std::string root = !base.empty() ? base : env && *env ? env : "/tmp";
  std::string templ = root + "/" + prefix + "-XXXXXX";
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) != nullptr) path_ = buf.data();
}

TempDir::~TempDir() {
  const char* keep = std::getenv("GLEANER_KEEP_TEMP");
  if (!path_.empty() && !(keep && std::string(keep) == "1")) RemoveAll(path_);
}

std::string MemoryTempBase() {
  struct stat st;
  if (::stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) && ::access("/dev/shm", W_OK) == 0) {
    return "/dev/shm";
  }
  return "";
}

long long CpuTicks(pid_t pid) {
  std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  size_t close = stat.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream in(stat.substr(close + 2));
  std::string field;
  long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && in >> field; ++i) {
    if (i == 14) utime = std::atoll(field.c_str());
    if (i == 15) stime = std::atoll(field.c_str());
  }
  return utime + stime;
}

std::string ReadFile(const std::string& path, const std::string& fallback) {
  if (path.empty()) return fallback;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fallback;
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, size_t(n));
  }
  ::close(fd);
  return out;
}

bool WriteFile(const std::string& path, const std::string& content) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  size_t done = 0;
  while (done < content.size()) {
    ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += size_t(n);
  }
  ::close(fd);
  return done == content.size();
}

void RemoveAll(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return;
  if (S_ISDIR(st.st_mode)) {
    if (DIR* d = ::opendir(path.c_str())) {
      std::vector<std::string> names;
      while (dirent* e = ::readdir(d)) {
        std::string n = e->d_name;
        if (n != "." && n != "..") names.push_back(n);
      }
      ::closedir(d);
      for (const auto& n : names) RemoveAll(path + "/" + n);
    }
    ::rmdir(path.c_str());
  } else {
    ::unlink(path.c_str());
  }
}

std::string BinPath(const std::string& name) {
  // Benchmarks compare two builds by pointing this at the other one's binaries.
  if (const char* dir = std::getenv("GLEANER_BENCH_BIN_DIR"); dir != nullptr && *dir != '\0') {
    return std::string(dir) + "/" + name;
  }
#ifdef GLEANER_BIN_DIR
  return std::string(GLEANER_BIN_DIR) + "/" + name;
#else
  return name;
#endif
}

bool WaitUntil(const std::function<bool()>& cond, Millis timeout, Millis poll) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (cond()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(poll);
  }
}

// ---- processes -----------------------------------------------------------------------------

std::string ExitStatus::ToString() const {
  if (exited) return "exit " + std::to_string(code);
  if (signaled) return "signal " + std::to_string(signal);
  return "running";
}

namespace {
ExitStatus FromWaitStatus(int ws) {
  ExitStatus e;
  if (WIFEXITED(ws)) {
    e.exited = true;
    e.code = WEXITSTATUS(ws);
  } else if (WIFSIGNALED(ws)) {
    e.signaled = true;
    e.signal = WTERMSIG(ws);
  }
  return e;
}
}  // namespace

Process::Process(ProcessSpec spec) : spec_(std::move(spec)) {}

Process::~Process() {
  if (pid_ > 0 && !exit_) Stop();
}

bool Process::Start(std::string* error) {
  if (pid_ > 0 && !exit_ && Running()) {
    *error = "already running";
    return false;
  }
  std::string binary = spec_.binary;
  if (binary.find('/') == std::string::npos) binary = BinPath(binary);

  // Everything the child needs is prepared here: after fork only async-signal-safe calls.
  std::vector<std::string> argv_s = {binary};
  argv_s.insert(argv_s.end(), spec_.args.begin(), spec_.args.end());
  std::set<std::string> drop(spec_.unset_env.begin(), spec_.unset_env.end());
  for (const auto& kv : spec_.env) drop.insert(kv.first);
  std::vector<std::string> env_s;
  for (char** e = environ; *e; ++e) {
    std::string entry = *e;
    if (!drop.count(entry.substr(0, entry.find('=')))) env_s.push_back(entry);
  }
  for (const auto& kv : spec_.env) env_s.push_back(kv.first + "=" + kv.second);
  std::vector<char*> argv, envp;
  for (auto& s : argv_s) argv.push_back(&s[0]);
  argv.push_back(nullptr);
  for (auto& s : env_s) envp.push_back(&s[0]);
  envp.push_back(nullptr);
  const std::string out = spec_.stdout_path.empty() ? "/dev/null" : spec_.stdout_path;
  const std::string err = spec_.stderr_path.empty() ? "/dev/null" : spec_.stderr_path;
  const std::string cwd = spec_.cwd;

  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) {
    *error = std::string("pipe: ") + std::strerror(errno);
    return false;
  }
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    *error = std::string("fork: ") + std::strerror(errno);
    ::close(pipefd[0]);
    ::close(pipefd[1]);
    return false;
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGPIPE, SIG_DFL);
    int fail_errno = 0;
    int ofd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    int efd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    int nfd = ::open("/dev/null", O_RDONLY);
    if (ofd < 0 || efd < 0 || nfd < 0) fail_errno = errno;
    if (!fail_errno) {
      ::dup2(nfd, 0);
      ::dup2(ofd, 1);
      ::dup2(efd, 2);
      // Leave no inherited descriptor (sockets of the test's clients) open in the child.
      for (int fd = 3; fd < 1024; ++fd) {
        if (fd != pipefd[1]) ::close(fd);
      }
      if (!cwd.empty() && ::chdir(cwd.c_str()) != 0) fail_errno = errno;
    }
    if (!fail_errno) {
      ::execve(argv[0], argv.data(), envp.data());
      fail_errno = errno;
    }
    ssize_t ignored = ::write(pipefd[1], &fail_errno, sizeof fail_errno);
    (void)ignored;
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also from the parent, so Signal() works at once
  ::close(pipefd[1]);
  int child_errno = 0;
  ssize_t n;
  do {
    n = ::read(pipefd[0], &child_errno, sizeof child_errno);
  } while (n < 0 && errno == EINTR);
  ::close(pipefd[0]);
  pid_ = pid;
  exit_.reset();
  if (n > 0) {
    int ws = 0;
    ::waitpid(pid, &ws, 0);
    exit_ = FromWaitStatus(ws);
    *error = "cannot start " + binary + ": " + std::strerror(child_errno);
    return false;
  }
  return true;
}

bool Process::Running() {
  if (pid_ <= 0 || exit_) return false;
  int ws = 0;
  pid_t r = ::waitpid(pid_, &ws, WNOHANG);
  if (r == pid_) {
    exit_ = FromWaitStatus(ws);
    return false;
  }
  return r == 0;
}

void Process::Signal(int sig) {
  if (pid_ > 0) ::kill(-pid_, sig);
}

std::optional<ExitStatus> Process::Wait(Millis timeout) {
  if (pid_ <= 0) return std::nullopt;
  WaitUntil([&] { return !Running(); }, timeout, Millis(2));
  return exit_;
}

ExitStatus Process::Kill() {
  if (pid_ <= 0) return ExitStatus{};
  Signal(SIGKILL);
  if (!exit_) {
    int ws = 0;
    pid_t r;
    do {
      r = ::waitpid(pid_, &ws, 0);
    } while (r < 0 && errno == EINTR);
    if (r == pid_) exit_ = FromWaitStatus(ws);
  }
  return exit_.value_or(ExitStatus{});
}

ExitStatus Process::Stop(Millis grace) {
  if (pid_ <= 0) return ExitStatus{};
  if (Running()) {
    Signal(SIGTERM);
    if (!Wait(grace)) return Kill();
  }
  Signal(SIGKILL);  // anything the child left in its group
  return exit_.value_or(ExitStatus{});
}

std::optional<int> WaitForPortFile(const std::string& path, Process* proc, Millis timeout) {
  std::optional<int> port;
  WaitUntil(
      [&] {
        std::string text = ReadFile(path);
        if (!text.empty() && text.back() == '\n') {
          int p = std::atoi(text.c_str());
          if (p > 0 && p < 65536) {
            port = p;
            return true;
          }
        }
        return proc != nullptr && !proc->Running();
      },
      timeout, Millis(2));
  return port;
}

ToolRun RunTool(const TempDir& dir, ProcessSpec spec, Millis timeout) {
  static std::atomic<int> runs{0};
  std::string n = std::to_string(++runs);
  std::string name = spec.binary.substr(spec.binary.rfind('/') + 1);
  spec.stdout_path = dir.File(name + n + ".out");
  spec.stderr_path = dir.File(name + n + ".err");
  Process p(spec);
  std::string error;
  ToolRun r;
  if (!p.Start(&error)) {
    r.err = error;
    return r;
  }
  std::optional<ExitStatus> st = p.Wait(timeout);
  if (st.has_value()) r.code = st->exited ? st->code : 128 + st->signal;
  r.out = p.Stdout();
  r.err = p.Stderr();
  return r;
}

}  // namespace gleaner::testing
