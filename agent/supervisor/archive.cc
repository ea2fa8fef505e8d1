#include "agent/supervisor/archive.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>
#include <vector>

#include "agent/protocol/checkpoint_dir.h"
#include "shared/native/files.h"
#include "shared/sha256.h"

namespace gleaner::agent {
namespace {

constexpr char kMagic[8] = {'G', 'L', 'N', 'R', 'C', 'K', 'P', 'T'};
constexpr uint32_t kVersion = 1;
constexpr uint32_t kMaxEntries = 1025;

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

Status WriteAllFd(int fd, const void* data, size_t len, Sha256* h = nullptr) {
  if (h != nullptr) h->Update(data, len);
  const char* p = static_cast<const char*>(data);
  while (len > 0) {
    ssize_t n = write(fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::Io(std::string("write: ") + strerror(errno));
    p += n;
    len -= size_t(n);
  }
  return Status::Ok();
}

// Reads exactly len bytes (hashing them when h is set); kCorruption on a short file.
Status ReadExact(int fd, void* data, size_t len, Sha256* h = nullptr) {
  char* p = static_cast<char*>(data);
  size_t total = len;
  while (len > 0) {
    ssize_t n = read(fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::Io(std::string("read: ") + strerror(errno));
    if (n == 0) return Status::Corruption("checkpoint archive is truncated");
    p += n;
    len -= size_t(n);
  }
  if (h != nullptr) h->Update(data, total);
  return Status::Ok();
}

void PutLe(std::string* s, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) s->push_back(char(uint8_t(v >> (8 * i))));
}

uint64_t GetLe(const unsigned char* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

Status CopyFileInto(int out, const std::string& path, int64_t size, Sha256* h) {
  Fd in(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (in.get() < 0) return Status::Io("open " + path + ": " + strerror(errno));
  std::vector<char> buf(1 << 16);
  int64_t left = size;
  while (left > 0) {
    size_t want = size_t(std::min<int64_t>(left, int64_t(buf.size())));
    GLEANER_RETURN_IF_ERROR(ReadExact(in.get(), buf.data(), want));
    GLEANER_RETURN_IF_ERROR(WriteAllFd(out, buf.data(), want, h));
    left -= int64_t(want);
  }
  return Status::Ok();
}

}  // namespace

Result<CheckpointManifest> PackCheckpoint(const std::string& dir, const std::string& archive) {
  Result<CheckpointManifest> m = train::VerifyCheckpointDir(dir);
  if (!m.ok()) return m.status();
  struct Entry {
    std::string name;
    int64_t size;
  };
  std::vector<Entry> entries;
  for (const ManifestFile& f : m->files) entries.push_back({f.name, f.size});
  Result<files::FileDigest> md = files::Digest(files::Join(dir, kManifestName));
  if (!md.ok()) return md.status();
  entries.push_back({kManifestName, md->size});

  std::string tmp = archive + ".tmp";
  {
    Fd out(open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (out.get() < 0) return Status::Io("open " + tmp + ": " + strerror(errno));
    std::string header(kMagic, sizeof kMagic);
    PutLe(&header, kVersion, 4);
    PutLe(&header, entries.size(), 4);
    Sha256 hash;
    GLEANER_RETURN_IF_ERROR(WriteAllFd(out.get(), header.data(), header.size(), &hash));
    for (const Entry& e : entries) {
      std::string h;
      PutLe(&h, e.name.size(), 2);
      h += e.name;
      PutLe(&h, uint64_t(e.size), 8);
      GLEANER_RETURN_IF_ERROR(WriteAllFd(out.get(), h.data(), h.size(), &hash));
      GLEANER_RETURN_IF_ERROR(CopyFileInto(out.get(), files::Join(dir, e.name), e.size, &hash));
    }
    Digest digest = hash.Finish();
    GLEANER_RETURN_IF_ERROR(WriteAllFd(out.get(), digest.data(), digest.size()));
    if (fsync(out.get()) != 0) return Status::Io("fsync " + tmp + ": " + strerror(errno));
  }
  GLEANER_RETURN_IF_ERROR(files::RenameDurable(tmp, archive));
  return m;
}

namespace {

Result<CheckpointManifest> UnpackInto(const std::string& archive, const std::string& dir) {
  Fd in(open(archive.c_str(), O_RDONLY | O_CLOEXEC));
  if (in.get() < 0) return Status::Io("open " + archive + ": " + strerror(errno));
  unsigned char header[16];
  Sha256 hash;
  GLEANER_RETURN_IF_ERROR(ReadExact(in.get(), header, sizeof header, &hash));
  if (std::memcmp(header, kMagic, sizeof kMagic) != 0) {
    return Status::Corruption("not a checkpoint archive (bad magic)");
  }
  uint32_t version = uint32_t(GetLe(header + 8, 4));
  if (version != kVersion) {
    return Status::Corruption("checkpoint archive version " + std::to_string(version) +
                              " is not supported");
  }
  uint32_t count = uint32_t(GetLe(header + 12, 4));
  if (count == 0 || count > kMaxEntries) {
    return Status::Corruption("checkpoint archive has " + std::to_string(count) + " entries");
  }
  std::string tmp = dir + ".tmp";
  GLEANER_RETURN_IF_ERROR(files::RemoveTree(tmp));
  GLEANER_RETURN_IF_ERROR(files::MakeDirs(tmp));
  std::set<std::string> seen;
  std::vector<char> buf(1 << 16);
  for (uint32_t i = 0; i < count; ++i) {
    unsigned char len_bytes[2];
    GLEANER_RETURN_IF_ERROR(ReadExact(in.get(), len_bytes, 2, &hash));
    size_t name_len = size_t(GetLe(len_bytes, 2));
    if (name_len == 0 || name_len > 255) return Status::Corruption("bad entry name length");
    std::string name(name_len, '\0');
    GLEANER_RETURN_IF_ERROR(ReadExact(in.get(), &name[0], name_len, &hash));
    if (name.find('/') != std::string::npos || name.find('\0') != std::string::npos ||
        name == "." || name == ".." || !seen.insert(name).second) {
      return Status::Corruption("bad or repeated entry name in checkpoint archive");
    }
    unsigned char size_bytes[8];
    GLEANER_RETURN_IF_ERROR(ReadExact(in.get(), size_bytes, 8, &hash));
    uint64_t size = GetLe(size_bytes, 8);
    if (size > (uint64_t(1) << 46)) return Status::Corruption("entry size out of range");
    std::string path = files::Join(tmp, name);
    Fd out(open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (out.get() < 0) return Status::Io("open " + path + ": " + strerror(errno));
    uint64_t left = size;
    while (left > 0) {
      size_t want = size_t(std::min<uint64_t>(left, buf.size()));
      GLEANER_RETURN_IF_ERROR(ReadExact(in.get(), buf.data(), want, &hash));
      GLEANER_RETURN_IF_ERROR(WriteAllFd(out.get(), buf.data(), want));
      left -= want;
    }
    if (fsync(out.get()) != 0) return Status::Io("fsync " + path + ": " + strerror(errno));
  }
  Digest want = hash.Finish();
  unsigned char got[32];
  GLEANER_RETURN_IF_ERROR(ReadExact(in.get(), got, sizeof got));
  if (std::memcmp(got, want.data(), sizeof got) != 0) {
    return Status::Corruption("checkpoint archive checksum does not match");
  }
  char extra;
  ssize_t n = read(in.get(), &extra, 1);
  if (n != 0) return Status::Corruption("trailing bytes after the last archive entry");
  Result<CheckpointManifest> m = train::VerifyCheckpointDir(tmp);
  if (!m.ok()) return Status::Corruption(m.status().message());
  if (m->files.size() + 1 != count) {
    return Status::Corruption("checkpoint archive holds files the manifest does not list");
  }
  GLEANER_RETURN_IF_ERROR(files::RemoveTree(dir));
  GLEANER_RETURN_IF_ERROR(files::RenameDurable(tmp, dir));
  return m;
}

}  // namespace

Result<CheckpointManifest> UnpackCheckpoint(const std::string& archive, const std::string& dir) {
  Result<CheckpointManifest> m = UnpackInto(archive, dir);
  if (!m.ok()) files::RemoveTree(dir + ".tmp");
  return m;
}

}  // namespace gleaner::agent
