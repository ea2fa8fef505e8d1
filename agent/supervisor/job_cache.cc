#include "agent/supervisor/job_cache.h"

#include <sys/stat.h>
#include <utime.h>

#include <cerrno>
#include <cstring>

#include "agent/supervisor/log.h"
#include "shared/native/files.h"

namespace gleaner::agent {

Status OpenJobCache(const std::string& dir) {
  struct stat st;
  if (::lstat(dir.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) {
    GLEANER_RETURN_IF_ERROR(files::RemoveTree(dir));
  }
  GLEANER_RETURN_IF_ERROR(files::MakeDirs(dir, 0700));
  if (::utime(dir.c_str(), nullptr) != 0) {
    return Status(Code::kIo, "utime " + dir + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

int PruneJobCaches(const std::string& root, int64_t now_s, int64_t max_idle_s) {
  Result<std::vector<std::string>> names = files::ListDir(root);
  if (!names.ok()) {
    if (names.status().code() != Code::kNotFound) {
      Log("job caches: %s", names.status().ToString().c_str());
    }
    return 0;
  }
  int removed = 0;
  for (const std::string& name : *names) {
    const std::string path = files::Join(root, name);
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0) continue;  // gone meanwhile
    const bool stray = !S_ISDIR(st.st_mode);
    if (!stray && now_s - int64_t(st.st_mtime) <= max_idle_s) continue;
    Status s = files::RemoveTree(path);
    if (!s.ok()) {
      Log("job caches: %s", s.ToString().c_str());
      continue;
    }
    Log("job caches: removed %s (%s)", name.c_str(), stray ? "not a directory" : "unused");
    ++removed;
  }
  return removed;
}

}  // namespace gleaner::agent
