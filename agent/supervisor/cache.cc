#include "agent/supervisor/cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utime.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "shared/native/files.h"
#include "shared/sha256.h"

namespace gleaner::agent {
namespace {

// Streams from to to (weights can be larger than memory).
Status CopyFile(const std::string& from, const std::string& to) {
  int in = open(from.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) return Status::Io("open " + from + ": " + std::strerror(errno));
  int out = open(to.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out < 0) {
    close(in);
    return Status::Io("create " + to + ": " + std::strerror(errno));
  }
  std::vector<char> buf(1 << 20);
  ssize_t n = 0;
  bool ok = true;
  while (ok && (n = read(in, buf.data(), buf.size())) > 0) {
    ok = write(out, buf.data(), size_t(n)) == n;
  }
  ok = ok && n == 0;
  close(in);
  if (close(out) != 0) ok = false;
  return ok ? Status::Ok() : Status::Io("copy " + from + " to " + to + " failed");
}

}  // namespace

Status DownloadVerified(CoordinatorApi* api, const std::string& url, const std::string& sha256,
                        int64_t size, const std::string& path, bool resume, bool remote) {
  if (!IsSha256Hex(sha256)) return Status::Invalid("expected sha256 is not 64 lowercase hex");
  int64_t have = 0;
  struct stat st;
  if (resume && stat(path.c_str(), &st) == 0) have = int64_t(st.st_size);
  if (size >= 0 && have > size) {
    files::RemoveTree(path);
    have = 0;
  }
  // A complete .part (killed between the last byte and the rename) needs no request at all.
  if (!(resume && size >= 0 && have == size)) {
    Status got = api->GetFile(url, path, have, size, remote);
    if (got.code() == Code::kCorruption) files::RemoveTree(path);  // longer than declared
    GLEANER_RETURN_IF_ERROR(got);
  }
  Result<files::FileDigest> d = files::Digest(path);
  if (!d.ok()) return d.status();
  if (size >= 0 && d->size != size) {
    files::RemoveTree(path);
    return Status::Corruption("downloaded " + std::to_string(d->size) + " bytes, expected " +
                              std::to_string(size) + " (the downloaded file was deleted)");
  }
  if (d->sha256 != sha256) {
    files::RemoveTree(path);
    return Status::Corruption("sha256 mismatch: got " + d->sha256 + ", expected " + sha256 +
                              " (the downloaded file was deleted)");
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
  std::lock_guard<std::mutex> fetching(fetch_mu_);
  std::string part = path + ".part";
  Status s =
      DownloadVerified(api, obj.url, obj.sha256, obj.size, part, /*resume=*/true, obj.remote);
  if (!s.ok()) return s;  // a mismatch removed the .part; a broken transfer keeps it
  std::lock_guard<std::mutex> lock(mu_);
  GLEANER_RETURN_IF_ERROR(files::RenameDurable(part, path));
  return path;
}

Status MaterializeFolder(const std::string& dir, const std::vector<std::string>& paths,
                         const std::vector<std::string>& cached) {
  GLEANER_RETURN_IF_ERROR(files::RemoveTree(dir));
  for (size_t i = 0; i < paths.size(); ++i) {
    std::string target = files::Join(dir, paths[i]);
    GLEANER_RETURN_IF_ERROR(files::MakeDirs(target.substr(0, target.rfind('/'))));
    if (link(cached[i].c_str(), target.c_str()) == 0) continue;
    if (errno != EXDEV && errno != EPERM && errno != EMLINK) {
      return Status::Io("link " + target + ": " + std::strerror(errno));
    }
    GLEANER_RETURN_IF_ERROR(CopyFile(cached[i], target));
  }
  return Status::Ok();
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
    // Verified files and cut-off downloads (<sha256>.part): both hold disk, both age out.
    const bool part = n.size() == 69 && n.compare(64, 5, ".part") == 0;
    if (!IsSha256Hex(part ? n.substr(0, 64) : n)) continue;
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
