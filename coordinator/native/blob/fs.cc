#include "coordinator/native/blob/fs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "shared/native/files.h"

namespace gleaner::native {

namespace {

Status ErrnoStatus(const std::string& what, const std::string& path, int err) {
  std::string msg = what + " " + path + ": " + std::strerror(err);
  if (err == ENOSPC || err == EDQUOT) return Status(Code::kNoSpace, msg);
  if (err == ENOENT) return Status::NotFound(msg);
  if (err == EEXIST) return Status::Conflict(msg);
  return Status::Io(msg);
}

class PosixWritableFile : public WritableFile {
 public:
  PosixWritableFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~PosixWritableFile() override { Close(); }

  Status Append(const char* data, size_t len) override {
    while (len > 0) {
      ssize_t n = ::write(fd_, data, len);
      if (n < 0) {
        if (errno == EINTR) continue;
        return ErrnoStatus("write", path_, errno);
      }
      data += n;
      len -= size_t(n);
    }
    return Status::Ok();
  }
  Status Sync() override {
    if (::fsync(fd_) != 0) return ErrnoStatus("fsync", path_, errno);
    return Status::Ok();
  }
  Status Close() override {
    if (fd_ < 0) return Status::Ok();
    int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) return ErrnoStatus("close", path_, errno);
    return Status::Ok();
  }

 private:
  std::string path_;
  int fd_;
};

class PosixReadableFile : public ReadableFile {
 public:
  PosixReadableFile(std::string path, int fd, int64_t size)
      : path_(std::move(path)), fd_(fd), size_(size) {}
  ~PosixReadableFile() override { ::close(fd_); }
  int64_t size() const override { return size_; }
  Result<size_t> ReadAt(int64_t offset, size_t n, char* buf) override {
    for (;;) {
      ssize_t got = ::pread(fd_, buf, n, off_t(offset));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) return ErrnoStatus("read", path_, errno);
      return size_t(got);
    }
  }

 private:
  std::string path_;
  int fd_;
  int64_t size_;
};

class PosixFs : public Fs {
 public:
  Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path,
                                                        int mode) override {
    int fd;
    do {
      fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0) return ErrnoStatus("create", path, errno);
    return std::unique_ptr<WritableFile>(new PosixWritableFile(path, fd));
  }

  Result<std::unique_ptr<ReadableFile>> OpenReadable(const std::string& path) override {
    int fd;
    do {
      fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0) return ErrnoStatus("open", path, errno);
    struct stat st;
    if (::fstat(fd, &st) != 0) {
      int err = errno;
      ::close(fd);
      return ErrnoStatus("stat", path, err);
    }
    if (!S_ISREG(st.st_mode)) {
      ::close(fd);
      return Status::NotFound("not a regular file: " + path);
    }
    return std::unique_ptr<ReadableFile>(new PosixReadableFile(path, fd, int64_t(st.st_size)));
  }

  Status Rename(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) return ErrnoStatus("rename", from, errno);
    return Status::Ok();
  }

  Status Link(const std::string& from, const std::string& to) override {
    if (::link(from.c_str(), to.c_str()) != 0) return ErrnoStatus("link", to, errno);
    return Status::Ok();
  }

  Status Remove(const std::string& path) override {
    if (::unlink(path.c_str()) != 0) return ErrnoStatus("remove", path, errno);
    return Status::Ok();
  }

  Status SyncDir(const std::string& dir) override {
    int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return ErrnoStatus("open dir", dir, errno);
    int rc = ::fsync(fd);
    int err = errno;
    ::close(fd);
    if (rc != 0) return ErrnoStatus("fsync dir", dir, err);
    return Status::Ok();
  }

  Status CreateDirs(const std::string& dir) override {
    if (dir.empty() || dir == "." || dir == "/") return Status::Ok();
    struct stat st;
    if (::stat(dir.c_str(), &st) == 0) {
      if (S_ISDIR(st.st_mode)) return Status::Ok();
      return Status::Io("not a directory: " + dir);
    }
    std::string parent = files::Dirname(dir);
    GLEANER_RETURN_IF_ERROR(CreateDirs(parent));
    if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
      return ErrnoStatus("mkdir", dir, errno);
    }
    return SyncDir(parent);
  }

  bool Exists(const std::string& path) override {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0;
  }
};

}  // namespace

Fs* DefaultFs() {
  static PosixFs fs;
  return &fs;
}

Result<std::string> ReadWholeFile(Fs* fs, const std::string& path) {
  auto file = fs->OpenReadable(path);
  if (!file.ok()) return file.status();
  std::string out;
  out.resize(size_t((*file)->size()));
  size_t done = 0;
  while (done < out.size()) {
    auto n = (*file)->ReadAt(int64_t(done), out.size() - done, &out[done]);
    if (!n.ok()) return n.status();
    if (*n == 0) break;
    done += *n;
  }
  out.resize(done);
  return out;
}

}  // namespace gleaner::native
