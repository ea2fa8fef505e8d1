#include "agent/supervisor/self_update.h"

#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "agent/supervisor/child_process.h"
#include "agent/supervisor/log.h"
#include "shared/native/files.h"

#ifndef GLEANER_PINNED_RELEASE_KEYS
#define GLEANER_PINNED_RELEASE_KEYS ""
#endif

namespace gleaner::agent {
namespace {

constexpr int64_t kMaxDownloadBytes = int64_t(512) << 20;  // hard cap whatever a manifest says
constexpr int kDownloadTimeoutMs = 10 * 60 * 1000;         // a slow endless download is cut too
constexpr int kSelfTestTimeoutMs = 120 * 1000;
constexpr double kHealthyAfterS = 300;  // the crash-loop window: running this long is healthy

std::string SelfExe() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "";
  return std::string(buf, size_t(n));
}

// Pinned keys compiled in (separated by ',' ';' or newlines) followed by the --release-keys file.
Result<release::KeyRing> LoadKeys(const std::string& file) {
  std::string text = GLEANER_PINNED_RELEASE_KEYS;
  for (char& c : text) {
    if (c == ';' || c == ',') c = '\n';
  }
  if (file.empty() && text.find_first_not_of(" \n") == std::string::npos) {
    return release::KeyRing();  // no keys: updates off
  }
  if (!file.empty()) {
    Result<std::string> f = files::ReadAll(file, 1 << 20);
    if (!f.ok()) return Status::Invalid("--release-keys: " + f.status().message());
    text += "\n" + f.value();
  }
  Result<release::KeyRing> ring = release::ParseKeyRing(text);
  if (!ring.ok()) return Status::Invalid("release keys: " + ring.status().message());
  return ring;
}

}  // namespace

const char* ReleasePlatform() {
#if defined(__x86_64__)
  return "linux-x86_64";
#elif defined(__aarch64__)
  return "linux-aarch64";
#else
  return "linux-unknown";
#endif
}

Result<std::unique_ptr<SelfUpdate>> SelfUpdate::Create(const AgentConfig& config,
                                                       std::vector<std::string> args,
                                                       net::HttpClient* http) {
  Result<release::KeyRing> ring = LoadKeys(config.release_keys);
  if (!ring.ok()) return ring.status();
  if (!release::ParseVersion(config.version).ok()) {
    return Status::Internal("bad compiled-in version " + config.version);
  }
  Status s = files::MakeDirs(config.state_dir, 0700);
  if (!s.ok()) return s;
  return std::unique_ptr<SelfUpdate>(
      new SelfUpdate(config, std::move(args), http, std::move(ring.value())));
}

SelfUpdate::SelfUpdate(const AgentConfig& config, std::vector<std::string> args,
                       net::HttpClient* http, release::KeyRing ring)
    : config_(config), args_(std::move(args)), http_(http), enabled_(!ring.empty()) {
  UpdaterDeps deps;
  deps.now_s = [] { return int64_t(std::time(nullptr)); };
  deps.download = [this](const std::string& uri,
                         const std::function<bool(std::string_view)>& sink) {
    return Download(uri, sink);
  };
  deps.self_test = [this](const std::string& binary) { return SelfTest(binary); };
  const char* kill_at = std::getenv("GLEANER_TEST_UPDATE_KILL_AT_STEP");
  int kill_step = kill_at != nullptr ? std::atoi(kill_at) : 0;
  if (kill_step > 0) {
    deps.after_step = [kill_step](int step) {
      if (step == kill_step) {
        Log("test hook: SIGKILL after switch step %d", step);
        raise(SIGKILL);
      }
      return true;
    };
  }
  updater_.reset(new Updater(config_.state_dir, std::move(ring), ReleasePlatform(), deps));
  started_ = next_check_ = std::chrono::steady_clock::now();
}

std::vector<std::string> SelfUpdate::PassedArgs() const {
  std::vector<std::string> out;
  for (size_t i = 0; i < args_.size(); ++i) {
    if (args_[i] == "--trainer") {
      ++i;
      continue;
    }
    if (args_[i].rfind("--trainer=", 0) == 0 || args_[i] == "--self-test") continue;
    out.push_back(args_[i]);
  }
  out.push_back("--trainer=" + config_.trainer);
  return out;
}

void SelfUpdate::AtStart() {
  if (!enabled_)
    Log("self-update: off (no release keys pinned at build time or in --release-keys)");
  Status s = updater_->Recover();
  if (!s.ok()) Log("self-update: recovering an interrupted switch: %s", s.ToString().c_str());
  release::Version own = release::ParseVersion(config_.version).value();
  std::string cur = updater_->CurrentVersion();
  Result<release::Version> cur_v = release::ParseVersion(cur);
  if (!enabled_ && cur.empty()) return;  // nothing installed and no updates: nothing to do
  if (!cur_v.ok() || cur_v.value() < own) {
    s = updater_->Adopt(own, SelfExe());
    if (s.ok()) {
      Log("self-update: version %s is now the current version", config_.version.c_str());
    } else {
      Log("self-update: cannot record version %s as current: %s", config_.version.c_str(),
          s.ToString().c_str());
    }
    return;
  }
  if (cur == config_.version) {
    s = updater_->Prune();
    if (!s.ok()) Log("self-update: removing old versions: %s", s.ToString().c_str());
    return;
  }
  // `current` is a newer version installed by an update: run it (counting its starts).
  Result<bool> rolled_back = updater_->RecordStart();
  if (!rolled_back.ok()) {
    Log("self-update: recording the start: %s", rolled_back.status().ToString().c_str());
  } else if (rolled_back.value()) {
    Log("self-update: ERROR: version %s crash-looped (3 starts within 5 minutes); rolled back "
        "to %s, and %s will not be installed again",
        cur.c_str(), updater_->CurrentVersion().c_str(), cur.c_str());
    cur = updater_->CurrentVersion();
    if (cur == config_.version) return;
  }
  Log("self-update: starting the current version %s", cur.c_str());
  Exec(updater_->CurrentBinary());
}

void SelfUpdate::BetweenJobs(CoordinatorApi* api, bool after_job) {
  auto now = std::chrono::steady_clock::now();
  if (!healthy_ && (after_job || now - started_ >= std::chrono::duration<double>(kHealthyAfterS))) {
    Status s = updater_->MarkHealthy();
    healthy_ = s.ok();
  }
  if (!enabled_ || (!after_job && now < next_check_)) return;
  next_check_ = now + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                          std::chrono::duration<double>(config_.update_interval_s));
  Result<std::optional<std::string>> env =
      api->AgentRelease(ReleasePlatform(), config_.release_channel);
  if (!env.ok()) {
    Log("self-update: release check: %s", env.status().ToString().c_str());
    return;
  }
  if (!env->has_value() || **env == last_refused_) return;
  // Only to skip the normal case quietly: the release this binary already is.
  Result<release::Envelope> e = release::ParseEnvelope(**env);
  if (e.ok()) {
    Result<release::Manifest> m = release::ParseManifest(e->manifest_text);
    if (m.ok() && m->version.ToString() == config_.version) return;
  }
  Result<release::Version> v = updater_->Install(**env);
  if (!v.ok()) {
    Log("self-update: release refused: %s (still running %s)", v.status().ToString().c_str(),
        config_.version.c_str());
    Code c = v.status().code();
    if (c != Code::kUnavailable && c != Code::kIo) last_refused_ = **env;
    return;
  }
  Log("self-update: installed %s (verified, self-test passed); restarting into it",
      v->ToString().c_str());
  Exec(updater_->CurrentBinary());
}

Status SelfUpdate::Download(const std::string& uri,
                            const std::function<bool(std::string_view)>& sink) {
  net::HttpCall call;
  call.url = uri;
  call.timeout_ms = kDownloadTimeoutMs;
  int64_t total = 0;
  bool capped = false;
  call.sink = [&](std::string_view chunk) {
    total += int64_t(chunk.size());
    if (total > kMaxDownloadBytes) {
      capped = true;
      return false;
    }
    return sink(chunk);
  };
  Result<net::HttpResponse> r = http_->Send(call);
  if (!r.ok()) return r.status();
  if (capped) return Status::Corruption("download exceeds the hard cap of 512 MiB");
  if (r->status != 200) {
    Status s = StatusFromHttp(r->status, r->body);
    return Status::Unavailable("download: " + s.message());
  }
  return Status::Ok();
}

bool SelfUpdate::SelfTest(const std::string& binary) {
  std::vector<std::string> argv = {binary, "--self-test"};
  for (const std::string& a : PassedArgs()) argv.push_back(a);
  auto relay = [](const std::string& line) { Log("self-test: %s", line.c_str()); };
  Result<std::unique_ptr<ChildProcess>> child = ChildProcess::Start(argv, relay, relay);
  if (!child.ok()) {
    Log("self-test: cannot start %s: %s", binary.c_str(), child.status().ToString().c_str());
    return false;
  }
  int wait_status = 0;
  if (!(*child)->WaitFor(kSelfTestTimeoutMs, &wait_status)) {
    Log("self-test: %s did not finish in %d s: killed", binary.c_str(), kSelfTestTimeoutMs / 1000);
    return false;  // the destructor kills it
  }
  bool ok = WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0;
  if (!ok)
    Log("self-test: %s ended with %s", binary.c_str(), DescribeWaitStatus(wait_status).c_str());
  return ok;
}

void SelfUpdate::Exec(const std::string& binary) {
  std::vector<std::string> args = {binary};
  for (const std::string& a : PassedArgs()) args.push_back(a);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(&a[0]);
  argv.push_back(nullptr);
  std::fflush(nullptr);
  // Nothing but stdio crosses into the new image (sockets, state files).
  auto cloexec = [](int fd) {
    int flags = fcntl(fd, F_GETFD);
    if (fd > 2 && flags >= 0) fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
  };
  Result<std::vector<std::string>> fds = files::ListDir("/proc/self/fd");
  if (fds.ok()) {
    for (const std::string& fd : fds.value()) cloexec(std::atoi(fd.c_str()));
  } else {
    for (int fd = 3; fd < 1024; ++fd) cloexec(fd);
  }
  execv(binary.c_str(), argv.data());
  Log("self-update: exec %s failed: %s; this version keeps running", binary.c_str(),
      std::strerror(errno));
}

}  // namespace gleaner::agent
