#include "agent/supervisor/cache.h"

#include <sys/stat.h>
#include <unistd.h>
#include <utime.h>

#include <algorithm>
#include <atomic>
#include <vector>

#include "shared/native/files.h"
#include "shared/sha256.h"

namespace gleaner::agent {

Status DownloadVerified(CoordinatorApi* api, const std::string& url, const std::string& sha256,
                        int64_t size, const std::string& path) {
  if (!IsSha256Hex(sha256)) return Status::Invalid("expected sha256 is not 64 lowercase hex");
  GLEANER_RETURN_IF_ERROR(api->GetFile(url, path));
  Result<files::FileDigest> d = files::Digest(path);
  if (!d.ok()) return d.status();
  if (size >= 0 && d->size != size) {
    files::RemoveTree(path);
    return Status::Corruption("downloaded " + std::to_string(d->size) + " bytes, expected " +
                              std::to_string(size));
  }
  if (d->sha256 != sha256) {
    files::RemoveTree(path);
    return Status::Corruption("sha256 mismatch: got " + d->sha256 + ", expected " + sha256);
  }
  return Status::Ok();
}

Result<std::string> BlobCache::Fetch(CoordinatorApi* api, const RemoteObject& obj) {
  if (!IsSha256Hex(obj.sha256)) return Status::Invalid(obj.name + ": sha256 is not valid hex");
  std::string path = files::Join(dir_, obj.sha256);
  {
    std::lock_guard<std::mutex> lock(mu_);
    struct stat st;
    if (stat(path.c_str(), &st) == 0 && (obj.size < 0 || st.st_size == obj.size)) {
      utime(path.c_str(), nullptr);  // mark as recently used
      return path;
    }
  }
  static std::atomic<int> counter{0};
  std::string tmp =
      files::Join(dir_, "tmp-" + std::to_string(getpid()) + "-" + std::to_string(counter++));
  Status s = DownloadVerified(api, obj.url, obj.sha256, obj.size, tmp);
  if (!s.ok()) {
    files::RemoveTree(tmp);
    return s;
  }
  std::lock_guard<std::mutex> lock(mu_);
  GLEANER_RETURN_IF_ERROR(files::RenameDurable(tmp, path));
  return path;
}

void BlobCache::Evict(const std::set<std::string>& keep) {
  std::lock_guard<std::mutex> lock(mu_);
  Result<std::vector<std::string>> names = files::ListDir(dir_);
  if (!names.ok()) return;
  struct Entry {
    std::string path;
    int64_t size;
    time_t used;
  };
  std::vector<Entry> entries;
  int64_t total = 0;
  for (const std::string& n : *names) {
    if (!IsSha256Hex(n)) continue;
    std::string p = files::Join(dir_, n);
    struct stat st;
    if (stat(p.c_str(), &st) != 0) continue;
    entries.push_back({p, int64_t(st.st_size), st.st_mtime});
    total += st.st_size;
  }
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.used < b.used; });
  for (const Entry& e : entries) {
    if (total <= max_bytes_) break;
    if (keep.count(e.path) != 0) continue;
    if (files::RemoveTree(e.path).ok()) total -= e.size;
  }
}

}  // namespace gleaner::agent
