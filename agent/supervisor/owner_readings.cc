#include "agent/supervisor/owner_readings.h"

#include <dirent.h>
#include <glob.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>

#include "agent/supervisor/gpu.h"
#include "agent/supervisor/log.h"
#include "shared/native/files.h"

namespace gleaner::agent {
namespace {

std::string Basename(const std::string& p) {
  size_t s = p.rfind('/');
  return s == std::string::npos ? p : p.substr(s + 1);
}

std::string RunCapture(const char* command) {
  std::string out;
  FILE* f = popen(command, "r");
  if (f == nullptr) return out;
  char buf[512];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0 && out.size() < 4096) out.append(buf, n);
  if (pclose(f) != 0) out.clear();
  return out;
}

class SystemReadings : public OwnerReadingSource {
 public:
  void Read(const OwnerControls& c, OwnerReadings* r) override {
    time_t t = time(nullptr);
    struct tm lt;
    localtime_r(&t, &lt);
    r->weekday = lt.tm_wday;
    r->minute_of_day = lt.tm_hour * 60 + lt.tm_min;
    r->processes.clear();
    if (!c.pause_programs.empty()) r->processes = ListProcesses();
    r->gpu_temp_c.reset();
    if (c.max_gpu_temp_c > 0) {
      if (!nvml_) nvml_.reset(new Nvml());
      r->gpu_temp_c = nvml_->MaxTemperatureC(c.gpus);
      Once(!r->gpu_temp_c, &warned_temp_,
           "owner controls: no GPU temperature (NVML absent or unreadable): max-gpu-temp is "
           "inactive");
    }
    r->idle_s.reset();
    if (c.min_idle_s > 0) {
      struct timespec mono;
      clock_gettime(CLOCK_MONOTONIC, &mono);
      r->idle_s = ParseLogindIdle(
          RunCapture("loginctl show-session -p IdleHint -p IdleSinceHintMonotonic 2>/dev/null"),
          int64_t(mono.tv_sec) * 1000000 + mono.tv_nsec / 1000);
      if (!r->idle_s)
        r->idle_s = IdleFromDeviceTimes({"/dev/input/event*", "/dev/pts/[0-9]*"}, double(t));
      Once(!r->idle_s, &warned_idle_,
           "owner controls: no input idle time (no logind hint, no /dev/input or /dev/pts): "
           "idle-minutes is inactive");
    }
  }

 private:
  static void Once(bool missing, bool* warned, const char* msg) {
    if (missing && !*warned) Log("%s", msg);
    *warned = missing;
  }
  std::unique_ptr<Nvml> nvml_;
  bool warned_temp_ = false, warned_idle_ = false;
};

}  // namespace

std::unique_ptr<OwnerReadingSource> MakeSystemReadings() {
  return std::unique_ptr<OwnerReadingSource>(new SystemReadings());
}

std::vector<ProcessName> ListProcesses(const std::string& proc_dir) {
  std::vector<ProcessName> out;
  DIR* d = opendir(proc_dir.c_str());
  if (d == nullptr) return out;
  while (struct dirent* e = readdir(d)) {
    const char* n = e->d_name;
    bool pid = *n != '\0';
    for (const char* p = n; *p != '\0'; ++p) pid = pid && *p >= '0' && *p <= '9';
    if (!pid) continue;
    std::string base = proc_dir + "/" + n;
    ProcessName p;
    Result<std::string> comm = files::ReadAll(base + "/comm", 256);
    if (comm.ok()) {
      p.comm = *comm;
      while (!p.comm.empty() && p.comm.back() == '\n') p.comm.pop_back();
    }
    Result<std::string> cmdline = files::ReadAll(base + "/cmdline", 1 << 16);
    if (cmdline.ok()) p.argv0 = Basename(cmdline->substr(0, cmdline->find('\0')));
    if (!p.comm.empty() || !p.argv0.empty()) out.push_back(std::move(p));
  }
  closedir(d);
  return out;
}

std::optional<double> ParseLogindIdle(const std::string& output, int64_t now_monotonic_us) {
  std::optional<bool> hint;
  int64_t since = -1;
  size_t pos = 0;
  while (pos < output.size()) {
    size_t nl = output.find('\n', pos);
    if (nl == std::string::npos) nl = output.size();
    std::string line = output.substr(pos, nl - pos);
    pos = nl + 1;
    if (line == "IdleHint=yes") hint = true;
    if (line == "IdleHint=no") hint = false;
    if (line.rfind("IdleSinceHintMonotonic=", 0) == 0) {
      char* end = nullptr;
      const char* v = line.c_str() + 23;
      long long x = std::strtoll(v, &end, 10);
      if (end != v && *end == '\0' && x >= 0) since = x;
    }
  }
  // A hint never set (0) says nothing: no desktop reports idleness to logind here.
  if (!hint || since <= 0) return std::nullopt;
  if (!*hint) return 0.0;
  return std::max(0.0, double(now_monotonic_us - since) / 1e6);
}

std::optional<double> IdleFromDeviceTimes(const std::vector<std::string>& patterns, double now) {
  std::optional<double> newest;
  for (const std::string& pat : patterns) {
    glob_t g;
    if (glob(pat.c_str(), 0, nullptr, &g) == 0) {
      for (size_t i = 0; i < g.gl_pathc; ++i) {
        struct stat st;
        if (stat(g.gl_pathv[i], &st) != 0) continue;
        double t = std::max(double(st.st_atim.tv_sec), double(st.st_mtim.tv_sec));
        if (!newest || t > *newest) newest = t;
      }
    }
    globfree(&g);
  }
  if (!newest) return std::nullopt;
  return std::max(0.0, now - *newest);
}

}  // namespace gleaner::agent
