#include "shared/native/files.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "shared/sha256.h"

namespace gleaner::files {
namespace {

Status Errno(const std::string& what, const std::string& path) {
  return Status::Io(what + " " + path + ": " + std::strerror(errno));
}

Status WriteFd(int fd, std::string_view bytes, const std::string& path) {
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + off, bytes.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Errno("write", path);
    }
    off += size_t(n);
  }
  return Status::Ok();
}

}  // namespace

std::string Join(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  if (a.back() == '/') return a + b;
  return a + "/" + b;
}

std::string Dirname(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

Status WriteSynced(const std::string& path, std::string_view bytes, int mode) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return Errno("open", path);
  Status st = WriteFd(fd, bytes, path);
  if (st.ok() && ::fsync(fd) != 0) st = Errno("fsync", path);
  if (::close(fd) != 0 && st.ok()) st = Errno("close", path);
  return st;
}

Status Fsync(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Errno("open", path);
  Status st;
  if (::fsync(fd) != 0) st = Errno("fsync", path);
  ::close(fd);
  return st;
}

Status RenameDurable(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) return Errno("rename to", to);
  return Fsync(Dirname(to));
}

Status WriteDurable(const std::string& path, std::string_view bytes, int mode) {
  std::string tmp = path + ".tmp";
  Status st = WriteSynced(tmp, bytes, mode);
  if (st.ok()) st = RenameDurable(tmp, path);
  if (!st.ok()) ::unlink(tmp.c_str());  // gone already when only the directory fsync failed
  return st;
}

namespace {

// Reads the file at path in chunks, handing each to sink; a non-ok Status from sink stops the
// read and is returned. A missing file is NotFound.
template <typename Sink>
Status ReadChunks(const std::string& path, Sink sink) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return Status::NotFound(path + " does not exist");
    return Errno("open", path);
  }
  Status st;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      st = Errno("read", path);
      break;
    }
    if (n == 0) break;
    st = sink(buf, size_t(n));
    if (!st.ok()) break;
  }
  ::close(fd);
  return st;
}

}  // namespace

Result<std::string> ReadAll(const std::string& path, int64_t max_size) {
  std::string out;
  GLEANER_RETURN_IF_ERROR(ReadChunks(path, [&](const char* data, size_t n) {
    if (int64_t(out.size() + n) > max_size) {
      return Status(Code::kTooLarge, path + " is larger than " + std::to_string(max_size));
    }
    out.append(data, n);
    return Status::Ok();
  }));
  return out;
}

Result<FileDigest> Digest(const std::string& path) {
  Sha256 h;
  FileDigest d;
  GLEANER_RETURN_IF_ERROR(ReadChunks(path, [&](const char* data, size_t n) {
    h.Update(data, n);
    d.size += int64_t(n);
    return Status::Ok();
  }));
  d.sha256 = HexEncode(h.Finish());
  return d;
}

Status MakeDirs(const std::string& path, int mode) {
  if (path.empty()) return Status::Ok();
  if (IsDir(path)) return Status::Ok();
  std::string parent = Dirname(path);
  if (parent != path && parent != "." && parent != "/") {
    GLEANER_RETURN_IF_ERROR(MakeDirs(parent, mode));
  }
  if (::mkdir(path.c_str(), mode_t(mode)) != 0 && errno != EEXIST) return Errno("mkdir", path);
  return Status::Ok();
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

bool IsDir(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

Result<std::vector<std::string>> ListDir(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    if (errno == ENOENT) return Status::NotFound(dir + " does not exist");
    return Errno("opendir", dir);
  }
  std::vector<std::string> names;
  while (struct dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

Status RemoveTree(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return Status::Ok();
    return Errno("stat", path);
  }
  if (S_ISDIR(st.st_mode)) {
    Result<std::vector<std::string>> names = ListDir(path);
    if (!names.ok()) return names.status();
    for (const std::string& n : *names) GLEANER_RETURN_IF_ERROR(RemoveTree(Join(path, n)));
    if (::rmdir(path.c_str()) != 0) return Errno("rmdir", path);
    return Status::Ok();
  }
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) return Errno("unlink", path);
  return Status::Ok();
}

}  // namespace gleaner::files
