#include "coordinator/native/pool/pool_local.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>

#include "coordinator/native/log.h"
#include "shared/native/files.h"

extern char** environ;

namespace gleaner::native {
namespace {

using Steady = std::chrono::steady_clock;

// A small file's bytes, "" when it cannot be read (files under /proc report size 0: ReadAll
// reads to the end).
std::string ReadSmall(const std::string& path) {
  Result<std::string> text = files::ReadAll(path, 1 << 20);
  return text.ok() ? *text : "";
}

// True when pid is alive and its command line mentions `needle` (our state dir).
bool ProcessRuns(pid_t pid, const std::string& needle) {
  if (pid <= 1 || ::kill(pid, 0) != 0) return false;
  std::string cmd = ReadSmall("/proc/" + std::to_string(pid) + "/cmdline");
  std::string stat = ReadSmall("/proc/" + std::to_string(pid) + "/stat");
  size_t paren = stat.rfind(')');
  if (paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z') {
    return false;  // a zombie waiting for its (new) parent
  }
  for (char& c : cmd) {
    if (c == '\0') c = ' ';
  }
  return cmd.find(needle) != std::string::npos;
}

struct Instance {
  std::string machine_id, dir;
  pid_t pid = -1;
  bool child = false;     // ours to waitpid (adopted ones are not)
  bool stopping = false;  // SIGTERM sent
  Steady::time_point stop_sent;
};

class LocalPool : public PoolProvider {
 public:
  explicit LocalPool(LocalPoolOptions o) : o_(std::move(o)) {
    prefix_ = "local-" + std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                            std::chrono::system_clock::now().time_since_epoch())
                                            .count());
  }

  Status Init() {
    GLEANER_RETURN_IF_ERROR(files::MakeDirs(o_.dir));
    Result<std::vector<std::string>> names = files::ListDir(o_.dir);
    if (!names.ok()) return names.status();
    for (const std::string& name : *names) {
      if (name.rfind("local-", 0) != 0) continue;
      std::string dir = o_.dir + "/" + name;
      pid_t pid = pid_t(std::atol(ReadSmall(dir + "/agent.pid").c_str()));
      if (ProcessRuns(pid, dir)) {
        Instance i;
        i.machine_id = name;
        i.dir = dir;
        i.pid = pid;
        instances_[name] = i;
        LogInfo("pool: adopted agent", {{"machine_id", name}, {"pid", pid}});
      } else {
        files::RemoveTree(dir);
      }
    }
    return Status::Ok();
  }

  ~LocalPool() override = default;  // agents keep running: they belong to the pool, not to us

  std::string name() const override { return "local"; }

  Result<int> Current() override {
    Reap();
    return Live();
  }

  Status SetTarget(int target) override {
    Reap();
    int live = Live();
    Status first;
    while (live < target) {
      Status st = StartOne();
      if (!st.ok()) return st;
      ++live;
    }
    if (live > target) {
      // Idle agents first (no current_job.json), newest first.
      std::vector<Instance*> order;
      for (auto& [id, i] : instances_) {
        if (!i.stopping) order.push_back(&i);
      }
      std::stable_sort(order.begin(), order.end(), [](const Instance* a, const Instance* b) {
        bool busy_a = files::Exists(a->dir + "/current_job.json");
        bool busy_b = files::Exists(b->dir + "/current_job.json");
        if (busy_a != busy_b) return !busy_a;
        return a->machine_id > b->machine_id;
      });
      for (int k = 0; k < live - target && k < int(order.size()); ++k) Terminate(*order[size_t(k)]);
    }
    return Status::Ok();
  }

  Result<std::vector<PoolInstance>> Instances() override {
    Reap();
    std::vector<PoolInstance> out;
    for (const auto& [id, i] : instances_) {
      out.push_back({id, i.machine_id, i.stopping ? "stopping" : "running"});
    }
    return out;
  }

  Result<bool> Reallocate(const std::string& machine_id) override {
    Reap();
    auto it = instances_.find(machine_id);
    if (it == instances_.end() || it->second.stopping) return false;
    Terminate(it->second);
    return true;
  }

 private:
  int Live() const {
    int n = 0;
    for (const auto& [id, i] : instances_) n += i.stopping ? 0 : 1;
    return n;
  }

  void Terminate(Instance& i) {
    LogInfo("pool: stopping agent", {{"machine_id", i.machine_id}, {"pid", i.pid}});
    ::kill(i.pid, SIGTERM);
    i.stopping = true;
    i.stop_sent = Steady::now();
  }

  // Forgets agents that exited (removing their state dirs); SIGKILLs overdue stoppers.
  void Reap() {
    for (auto it = instances_.begin(); it != instances_.end();) {
      Instance& i = it->second;
      bool gone;
      if (i.child) {
        int status = 0;
        pid_t r = ::waitpid(i.pid, &status, WNOHANG);
        gone = r == i.pid || (r < 0 && errno == ECHILD);
      } else {
        gone = !ProcessRuns(i.pid, i.dir);
      }
      if (gone) {
        if (!i.stopping) LogWarn("pool: agent exited", {{"machine_id", i.machine_id}});
        files::RemoveTree(i.dir);
        it = instances_.erase(it);
        continue;
      }
      if (i.stopping &&
          Steady::now() - i.stop_sent > std::chrono::duration<double>(o_.kill_after_s)) {
        ::kill(i.pid, SIGKILL);
      }
      ++it;
    }
  }

  Status StartOne() {
    Instance i;
    i.machine_id = prefix_ + "-" + std::to_string(++seq_);
    i.dir = o_.dir + "/" + i.machine_id;
    GLEANER_RETURN_IF_ERROR(files::MakeDirs(i.dir));
    std::vector<std::string> args = {o_.agent_bin,  "--coordinator", o_.coordinator_url,
                                     "--state-dir", i.dir,           "--machine-id",
                                     i.machine_id};
    args.insert(args.end(), o_.extra_args.begin(), o_.extra_args.end());
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e) {
      // Neither the coordinator's settings nor its secrets.
      if (std::strncmp(*e, "GLEANER_", 8) == 0 || std::strncmp(*e, "AWS_", 4) == 0 ||
          std::strncmp(*e, "SALAD_API_KEY=", 14) == 0) {
        continue;
      }
      env.emplace_back(*e);
    }
    env.push_back("GLEANER_ENROLL_TOKEN=" + o_.enroll_token);
    std::vector<char*> argv, envp;
    for (auto& a : args) argv.push_back(&a[0]);
    argv.push_back(nullptr);
    for (auto& e : env) envp.push_back(&e[0]);
    envp.push_back(nullptr);

    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&attr);
    std::string log = i.dir + "/agent.log";
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    // The coordinator blocks SIGTERM/SIGINT (a sigwait thread) and ignores SIGPIPE: the agent
    // must start with neither. Its own process group: a Ctrl-C on the coordinator leaves it.
    sigset_t none, defaults;
    sigemptyset(&none);
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGPIPE);
    sigaddset(&defaults, SIGTERM);
    sigaddset(&defaults, SIGINT);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setflags(
        &attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
    pid_t pid = -1;
    int rc = ::posix_spawn(&pid, o_.agent_bin.c_str(), &fa, &attr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    if (rc != 0) {
      files::RemoveTree(i.dir);
      return Status::Io("cannot start " + o_.agent_bin + ": " + std::strerror(rc));
    }
    i.pid = pid;
    i.child = true;
    Status st = files::WriteDurable(i.dir + "/agent.pid", std::to_string(pid) + "\n");
    if (!st.ok()) LogWarn("pool: cannot write agent.pid", {{"error", st.ToString()}});
    LogInfo("pool: started agent", {{"machine_id", i.machine_id}, {"pid", pid}});
    instances_[i.machine_id] = i;
    return Status::Ok();
  }

  LocalPoolOptions o_;
  std::string prefix_;
  int seq_ = 0;
  std::map<std::string, Instance> instances_;
};

}  // namespace

Result<std::unique_ptr<PoolProvider>> MakeLocalPool(LocalPoolOptions options) {
  auto pool = std::make_unique<LocalPool>(std::move(options));
  GLEANER_RETURN_IF_ERROR(pool->Init());
  return std::unique_ptr<PoolProvider>(std::move(pool));
}

}  // namespace gleaner::native
