#include "coordinator/cli/progress.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

namespace gleaner::cli {
namespace {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string Amount(int64_t v, const std::string& unit) {
  if (unit != "bytes") return std::to_string(v);
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  double d = double(v);
  int u = 0;
  while (d >= 1000 && u < 4) {
    d /= 1000;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", d, units[u]);
  return buf;
}

// Bytes the client has read from `real` so far, via its open descriptor; -1 if not open.
int64_t UploadPosition(const std::string& real) {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  int64_t pos = -1;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    char target[PATH_MAX];
    std::string link = std::string("/proc/self/fd/") + e->d_name;
    ssize_t n = readlink(link.c_str(), target, sizeof target - 1);
    if (n <= 0) continue;
    target[n] = '\0';
    if (real != target) continue;
    FILE* info = std::fopen((std::string("/proc/self/fdinfo/") + e->d_name).c_str(), "r");
    if (info == nullptr) continue;
    long long p = 0;
    if (std::fscanf(info, "pos: %lld", &p) == 1) pos = p;
    std::fclose(info);
    break;
  }
  closedir(dir);
  return pos;
}

}  // namespace

Progress::Progress(std::string label, int64_t total, std::string unit)
    : label_(std::move(label)),
      unit_(std::move(unit)),
      total_(total),
      tty_(isatty(STDERR_FILENO) == 1) {}

void Progress::Update(int64_t done, const std::string& status) {
  if (done < 0) return;
  if (total_ > 0 && done > total_) done = total_;
  int pct = total_ > 0 ? int(done * 100 / total_) : 0;
  if (tty_) {
    int64_t now = NowMs();
    if (drawn_ && now - last_draw_ms_ < 100 && status == last_status_ && done != total_) return;
    last_draw_ms_ = now;
    last_status_ = status;
    const int width = 30;
    int fill = total_ > 0 ? int(done * width / total_) : 0;
    std::string bar(size_t(fill), '#');
    bar.resize(width, '-');
    std::fprintf(stderr, "\r\033[K%s [%s] %3d%% %s/%s%s%s", label_.c_str(), bar.c_str(), pct,
                 Amount(done, unit_).c_str(), Amount(total_, unit_).c_str(),
                 status.empty() ? "" : " ", status.c_str());
    std::fflush(stderr);
    drawn_ = true;
    return;
  }
  int quarter = pct / 25;
  if (quarter == last_quarter_ && status == last_status_) return;
  last_quarter_ = quarter;
  last_status_ = status;
  std::fprintf(stderr, "%s: %d%% (%s of %s)%s%s\n", label_.c_str(), pct,
               Amount(done, unit_).c_str(), Amount(total_, unit_).c_str(),
               status.empty() ? "" : " ", status.c_str());
}

void Progress::Finish(const std::string& line) {
  if (tty_ && drawn_) std::fputs("\n", stderr);
  if (!line.empty()) std::fprintf(stderr, "%s\n", line.c_str());
}

Failure WithTransferProgress(const std::string& label, const std::string& path, int64_t total,
                             bool upload, const std::function<Failure()>& transfer) {
  Progress progress(label, total, "bytes");
  std::string real = path;
  if (upload) {
    char buf[PATH_MAX];
    if (realpath(path.c_str(), buf) != nullptr) real = buf;
  }
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  progress.Update(0);
  std::thread watcher([&] {
    std::unique_lock<std::mutex> lock(mu);
    while (!cv.wait_for(lock, std::chrono::milliseconds(200), [&] { return done; })) {
      int64_t moved = -1;
      if (upload) {
        moved = UploadPosition(real);
      } else {
        struct stat st;
        if (stat(path.c_str(), &st) == 0) moved = st.st_size;
      }
      progress.Update(moved);
    }
  });
  Failure f = transfer();
  {
    std::lock_guard<std::mutex> lock(mu);
    done = true;
  }
  cv.notify_all();
  watcher.join();
  if (f.ok()) progress.Update(total);
  progress.Finish("");
  return f;
}

}  // namespace gleaner::cli
