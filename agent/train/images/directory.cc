// A dataset given as a directory: the same rules as an archive (archive.h), applied to a walk
// that never follows symbolic links.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "shared/native/files.h"
#include "agent/train/images/archive_entries.h"

namespace gleaner::images {
namespace {

constexpr int kMaxDepth = 64;

Status Walk(const std::string& root, const std::string& rel, int depth,
            internal::EntryCollector* out) {
  if (depth > kMaxDepth) return Status::Invalid(root + ": directories nested too deep");
  const std::string dir = rel.empty() ? root : files::Join(root, rel);
  Result<std::vector<std::string>> names = files::ListDir(dir);
  if (!names.ok()) return names.status();
  for (const std::string& name : *names) {
    const std::string path = rel.empty() ? name : rel + "/" + name;
    if (IsHiddenPath(path)) continue;
    struct stat st;
    if (::lstat(files::Join(root, path).c_str(), &st) != 0) {
      return Status::Io("stat " + files::Join(root, path) + ": " + std::strerror(errno));
    }
    if (S_ISDIR(st.st_mode)) {
      GLEANER_RETURN_IF_ERROR(Walk(root, path, depth + 1, out));
      continue;
    }
    internal::EntryType type = S_ISREG(st.st_mode)   ? internal::EntryType::kFile
                               : S_ISLNK(st.st_mode) ? internal::EntryType::kSymlink
                                                     : internal::EntryType::kSpecial;
    GLEANER_RETURN_IF_ERROR(out->Add(path, type, uint64_t(st.st_size), {}));
  }
  return Status::Ok();
}

class Directory : public FileSet {
 public:
  Directory(std::string root, internal::EntryCollector&& c) : root_(std::move(root)) {
    files_ = std::move(c.files);
    notes_ = std::move(c.notes);
  }

  Result<std::string> Read(size_t i, uint64_t max_bytes) const override {
    if (i >= files_.size()) return Status::Invalid("no such file");
    const std::string path = files::Join(root_, files_[i].path);
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return Status::Io("open " + path + ": " + std::strerror(errno));
    std::string out(std::min(files_[i].size, max_bytes), '\0');
    size_t got = 0;
    while (got < out.size()) {
      ssize_t n = ::read(fd, &out[got], out.size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += size_t(n);
    }
    ::close(fd);
    if (got != out.size()) return Status::Io(path + ": changed size while being read");
    return out;
  }

 private:
  std::string root_;
};

}  // namespace

Result<std::unique_ptr<FileSet>> OpenDirectory(const std::string& dir,
                                               const ArchiveLimits& limits) {
  internal::EntryCollector c("directory", limits);
  GLEANER_RETURN_IF_ERROR(Walk(dir, "", 0, &c));
  GLEANER_RETURN_IF_ERROR(c.Finish());
  return std::unique_ptr<FileSet>(new Directory(dir, std::move(c)));
}

}  // namespace gleaner::images
