#include "agent/train/images/archive.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>

#include "agent/train/images/archive_entries.h"

namespace gleaner::images {
namespace internal {
namespace {

constexpr size_t kMaxPathBytes = 4096;
constexpr size_t kCrcChunk = 1u << 16;

const char* TypeNote(EntryType t) {
  switch (t) {
    case EntryType::kSymlink:
      return "symbolic link, not followed";
    case EntryType::kHardlink:
      return "hard link, not followed";
    default:
      return "special file (device, pipe or other), skipped";
  }
}

}  // namespace

Status EntryCollector::EntryError(std::string_view raw_name, const std::string& what,
                                  Code code) const {
  std::string shown(raw_name.substr(0, 200));
  return Status(code, std::string(format_) + " entry \"" + shown + "\": " + what);
}

Status EntryCollector::Add(std::string_view raw_name, EntryType type, uint64_t size,
                           const Location& loc) {
  Result<std::string> path = SafeEntryPath(raw_name);
  if (!path.ok()) return EntryError(raw_name, path.status().message());
  if (type == EntryType::kDirectory || path->empty() || IsHiddenPath(*path)) return Status::Ok();
  if (type != EntryType::kFile) {
    notes.push_back(*path + ": " + TypeNote(type));
    return Status::Ok();
  }
  if (int64_t(files.size()) >= limits_.max_entries) {
    return Status(Code::kTooLarge, std::string(format_) + " archive has more than " +
                                       std::to_string(limits_.max_entries) + " files");
  }
  if (size > limits_.max_entry_bytes) {
    return EntryError(raw_name,
                      std::to_string(size) + " bytes, over the limit of " +
                          std::to_string(limits_.max_entry_bytes),
                      Code::kTooLarge);
  }
  if (loc.method == Method::kDeflate && size > kRatioFloorBytes &&
      size / std::max<uint64_t>(loc.stored_size, 1) > limits_.max_ratio) {
    return EntryError(raw_name,
                      "compressed " + std::to_string(loc.stored_size) + " -> " +
                          std::to_string(size) + " bytes, over the ratio limit " +
                          std::to_string(limits_.max_ratio) + ":1 (zip bomb guard)",
                      Code::kTooLarge);
  }
  total_ += size;
  if (total_ > limits_.max_total_bytes) {
    return Status(Code::kTooLarge, std::string(format_) + " archive holds more than " +
                                       std::to_string(limits_.max_total_bytes) +
                                       " bytes uncompressed");
  }
  files.push_back({std::move(*path), size});
  locations.push_back(loc);
  return Status::Ok();
}

Status EntryCollector::Finish() {
  std::vector<size_t> order(files.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return files[a].path < files[b].path; });
  std::vector<ArchiveFile> f;
  std::vector<Location> l;
  for (size_t i : order) {
    if (!f.empty() && f.back().path == files[i].path) {
      return Status::Invalid(std::string(format_) + " entry \"" + files[i].path +
                             "\" appears twice");
    }
    f.push_back(std::move(files[i]));
    l.push_back(locations[i]);
  }
  files = std::move(f);
  locations = std::move(l);
  return Status::Ok();
}

namespace {

struct Mapping {
  void* addr = nullptr;
  size_t size = 0;
  ~Mapping() {
    if (addr != nullptr) munmap(addr, size);
  }
};

class Archive : public FileSet {
 public:
  Archive(EntryCollector&& c, std::string_view bytes, std::string owned,
          std::unique_ptr<Mapping> mapping)
      : locations_(std::move(c.locations)),
        owned_(std::move(owned)),
        mapping_(std::move(mapping)),
        bytes_(owned_.empty() ? bytes : std::string_view(owned_)) {
    files_ = std::move(c.files);
    notes_ = std::move(c.notes);
  }

  Result<std::string> Read(size_t i, uint64_t max_bytes) const override {
    if (i >= files_.size()) return Status::Invalid("no such archive file");
    const Location& loc = locations_[i];
    const uint64_t size = files_[i].size;
    std::string_view stored = bytes_.substr(loc.offset, loc.stored_size);
    Result<std::string> out = std::string();
    if (loc.method == Method::kStored) {
      out = std::string(stored.substr(0, std::min(size, max_bytes)));
    } else {
      out = InflateRaw(stored, size, max_bytes);
      if (!out.ok()) return out.status();
    }
    if (loc.has_crc && out->size() == size) {
      uLong crc = crc32(0L, Z_NULL, 0);
      for (size_t at = 0; at < out->size(); at += kCrcChunk) {
        size_t n = std::min<size_t>(kCrcChunk, out->size() - at);
        crc = crc32(crc, reinterpret_cast<const Bytef*>(out->data() + at), uInt(n));
      }
      if (crc != loc.crc) return Status::Corruption("CRC mismatch (damaged archive entry)");
    }
    return out;
  }

 private:
  std::vector<Location> locations_;
  std::string owned_;
  std::unique_ptr<Mapping> mapping_;
  std::string_view bytes_;
};

bool IsZip(std::string_view h) {
  return h.size() >= 4 && h[0] == 'P' && h[1] == 'K' &&
         ((h[2] == 3 && h[3] == 4) || (h[2] == 5 && h[3] == 6) || (h[2] == 7 && h[3] == 8));
}
bool IsGzip(std::string_view h) {
  return h.size() >= 2 && uint8_t(h[0]) == 0x1f && uint8_t(h[1]) == 0x8b;
}
bool IsTar(std::string_view h) {
  if (h.size() >= 263 && h.substr(257, 5) == "ustar") return true;
  // An empty tar is nothing but zero blocks.
  return h.size() >= 512 && h.substr(0, 512).find_first_not_of('\0') == std::string_view::npos;
}

Result<std::unique_ptr<FileSet>> Open(std::string_view bytes, const ArchiveLimits& limits,
                                      std::unique_ptr<Mapping> mapping) {
  std::string owned;
  const char* format = "zip";
  if (IsGzip(bytes)) {
    Result<std::string> tar = Gunzip(bytes, limits);
    if (!tar.ok()) return tar.status();
    owned = std::move(*tar);
    if (!IsTar(owned)) return Status::Invalid("a gzip file that does not hold a tar archive");
    format = "tar";
  } else if (IsTar(bytes)) {
    format = "tar";
  } else if (!IsZip(bytes)) {
    return Status::Invalid("not a zip or tar archive");
  }
  std::string_view view = owned.empty() ? bytes : std::string_view(owned);
  EntryCollector c(format, limits);
  GLEANER_RETURN_IF_ERROR(format[0] == 'z' ? ParseZip(view, &c) : ParseTar(view, &c));
  GLEANER_RETURN_IF_ERROR(c.Finish());
  return std::unique_ptr<FileSet>(
      new Archive(std::move(c), bytes, std::move(owned), std::move(mapping)));
}

}  // namespace
}  // namespace internal

bool LooksLikeArchive(std::string_view head) {
  return internal::IsZip(head) || internal::IsGzip(head) || internal::IsTar(head);
}

Result<std::unique_ptr<FileSet>> OpenArchive(std::string_view bytes, const ArchiveLimits& limits) {
  return internal::Open(bytes, limits, nullptr);
}

Result<std::unique_ptr<FileSet>> OpenArchiveFile(const std::string& path,
                                                 const ArchiveLimits& limits) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::Io("open " + path + ": " + std::strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::Io(path + ": not a regular file");
  }
  auto mapping = std::make_unique<internal::Mapping>();
  mapping->size = size_t(st.st_size);
  if (mapping->size > 0) {
    void* addr = mmap(nullptr, mapping->size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (addr == MAP_FAILED) {
      ::close(fd);
      return Status::Io("mmap " + path + ": " + std::strerror(errno));
    }
    mapping->addr = addr;
  }
  ::close(fd);
  std::string_view bytes(static_cast<const char*>(mapping->addr), mapping->size);
  return internal::Open(bytes, limits, std::move(mapping));
}

Result<std::string> SafeEntryPath(std::string_view raw) {
  if (raw.empty()) return Status::Invalid("empty name");
  if (raw.size() > internal::kMaxPathBytes) return Status::Invalid("name longer than 4096 bytes");
  if (raw.find('\0') != std::string_view::npos) return Status::Invalid("NUL byte in name");
  if (raw.find('\\') != std::string_view::npos) return Status::Invalid("backslash in name");
  if (raw[0] == '/') return Status::Invalid("absolute path");
  if (raw.size() >= 2 && raw[1] == ':' && std::isalpha(uint8_t(raw[0]))) {
    return Status::Invalid("drive-letter path");
  }
  std::string out;
  while (!raw.empty()) {
    size_t slash = raw.find('/');
    std::string_view part = raw.substr(0, slash);
    raw.remove_prefix(slash == std::string_view::npos ? raw.size() : slash + 1);
    if (part.empty() || part == ".") continue;
    if (part == "..") return Status::Invalid("path leaves the archive (..)");
    if (!out.empty()) out += '/';
    out += part;
  }
  return out;
}

bool IsHiddenPath(std::string_view path) {
  if (path.substr(0, 9) == "__MACOSX/" || path == "__MACOSX") return true;
  for (size_t at = 0; at < path.size();) {
    if (path[at] == '.') return true;
    size_t slash = path.find('/', at);
    if (slash == std::string_view::npos) break;
    at = slash + 1;
  }
  return false;
}

}  // namespace gleaner::images
