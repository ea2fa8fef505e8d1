// Zip headers (PKWARE APPNOTE 6.3): end of central directory (+ zip64), central directory,
// local headers. Only what a dataset needs; everything else is refused by name.
#include <algorithm>
#include <string>

#include "agent/train/images/archive_entries.h"

namespace gleaner::images::internal {
namespace {

constexpr uint32_t kLocalSig = 0x04034b50, kCentralSig = 0x02014b50, kEndSig = 0x06054b50;
constexpr uint32_t kEnd64Sig = 0x06064b50, kEnd64LocatorSig = 0x07064b50;
constexpr size_t kLocalBytes = 30, kCentralBytes = 46, kEndBytes = 22, kEnd64Bytes = 56;
constexpr size_t kEnd64LocatorBytes = 20, kMaxComment = 65535;
constexpr uint16_t kFlagEncrypted = 1, kFlagStrongEncryption = 1 << 6;
constexpr uint16_t kMethodAes = 99;
constexpr uint16_t kHostUnix = 3;
constexpr uint32_t kModeType = 0170000, kModeDir = 0040000, kModeFile = 0100000,
                   kModeLink = 0120000;

// Little-endian reads; callers check bounds first.
uint64_t Le(std::string_view b, size_t at, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = v << 8 | uint8_t(b[at + size_t(i)]);
  return v;
}
uint16_t U16(std::string_view b, size_t at) {
  return uint16_t(Le(b, at, 2));
}
uint32_t U32(std::string_view b, size_t at) {
  return uint32_t(Le(b, at, 4));
}
uint64_t U64(std::string_view b, size_t at) {
  return Le(b, at, 8);
}

Status Corrupt(const std::string& what) {
  return Status::Corruption("zip: " + what);
}

struct Directory {
  uint64_t entries = 0, offset = 0, size = 0;
  uint64_t end = 0;  // where the end records start: nothing of an entry may lie beyond
};

Status MultiDisk() {
  return Status::Invalid("zip: split (multi-disk) archives are not supported");
}

Result<Directory> FindDirectory(std::string_view b) {
  if (b.size() < kEndBytes) return Corrupt("too short to be a zip archive");
  size_t pos = b.size() - kEndBytes;
  const size_t lowest = b.size() - std::min(b.size(), kEndBytes + kMaxComment);
  // The end record is the last thing in the file but for its comment, whose length it holds.
  while (!(U32(b, pos) == kEndSig && pos + kEndBytes + U16(b, pos + 20) == b.size())) {
    if (pos == lowest) return Corrupt("no end of central directory (truncated or not a zip)");
    --pos;
  }
  uint32_t disk = U16(b, pos + 4), dir_disk = U16(b, pos + 6);
  Directory d;
  uint64_t on_disk = U16(b, pos + 8);
  d.entries = U16(b, pos + 10);
  d.size = U32(b, pos + 12);
  d.offset = U32(b, pos + 16);
  d.end = pos;
  if (on_disk == 0xFFFF || d.entries == 0xFFFF || d.size == 0xFFFFFFFF || d.offset == 0xFFFFFFFF) {
    if (pos < kEnd64LocatorBytes || U32(b, pos - kEnd64LocatorBytes) != kEnd64LocatorSig) {
      return Corrupt("zip64 end record locator missing");
    }
    size_t loc = pos - kEnd64LocatorBytes;
    if (U32(b, loc + 4) != 0 || U32(b, loc + 16) != 1) return MultiDisk();
    uint64_t at = U64(b, loc + 8);
    if (at > loc || loc - at < kEnd64Bytes || U32(b, size_t(at)) != kEnd64Sig) {
      return Corrupt("zip64 end record missing or outside the archive");
    }
    disk = U32(b, size_t(at) + 16);
    dir_disk = U32(b, size_t(at) + 20);
    on_disk = U64(b, size_t(at) + 24);
    d.entries = U64(b, size_t(at) + 32);
    d.size = U64(b, size_t(at) + 40);
    d.offset = U64(b, size_t(at) + 48);
    d.end = at;
  }
  if (disk != 0 || dir_disk != 0 || on_disk != d.entries) return MultiDisk();
  if (d.offset > d.end || d.size > d.end - d.offset) {
    return Corrupt("central directory lies outside the archive");
  }
  if (d.entries > d.size / kCentralBytes) return Corrupt("central directory too short");
  return d;
}

// Fills in the zip64 extended information extra field (0x0001) for the 32-bit fields that are
// saturated, in the order APPNOTE gives.
Status ReadZip64Extra(std::string_view extra, uint64_t* usize, uint64_t* csize, uint64_t* local) {
  for (size_t p = 0; p + 4 <= extra.size();) {
    uint16_t id = U16(extra, p), len = U16(extra, p + 2);
    if (p + 4 + len > extra.size()) return Corrupt("extra field runs past its entry");
    if (id == 0x0001) {
      std::string_view f = extra.substr(p + 4, len);
      size_t at = 0;
      for (uint64_t* v : {usize, csize, local}) {
        if (*v != 0xFFFFFFFF) continue;
        if (at + 8 > f.size()) return Corrupt("zip64 extra field too short");
        *v = U64(f, at);
        at += 8;
      }
      return Status::Ok();
    }
    p += 4 + size_t(len);
  }
  return Status::Ok();
}

EntryType TypeOf(std::string_view name, uint16_t made_by, uint32_t external) {
  if (!name.empty() && name.back() == '/') return EntryType::kDirectory;
  if (made_by >> 8 != kHostUnix) return EntryType::kFile;
  uint32_t mode = (external >> 16) & kModeType;
  if (mode == 0 || mode == kModeFile) return EntryType::kFile;
  if (mode == kModeDir) return EntryType::kDirectory;
  if (mode == kModeLink) return EntryType::kSymlink;
  return EntryType::kSpecial;
}

}  // namespace

Status ParseZip(std::string_view b, EntryCollector* out) {
  Result<Directory> d = FindDirectory(b);
  if (!d.ok()) return d.status();
  const uint64_t dir_end = d->offset + d->size;
  std::vector<std::pair<uint64_t, uint64_t>> spans;  // [local header, end of data) per file
  uint64_t p = d->offset;
  for (uint64_t i = 0; i < d->entries; ++i) {
    if (dir_end - p < kCentralBytes || U32(b, p) != kCentralSig) {
      return Corrupt("central directory entry " + std::to_string(i) + " is damaged");
    }
    uint16_t made_by = U16(b, p + 4), flags = U16(b, p + 8), method = U16(b, p + 10);
    uint64_t csize = U32(b, p + 20), usize = U32(b, p + 24), local = U32(b, p + 42);
    uint32_t crc = U32(b, p + 16), external = U32(b, p + 38);
    size_t name_len = U16(b, p + 28), extra_len = U16(b, p + 30), comment_len = U16(b, p + 32);
    if (dir_end - p - kCentralBytes < name_len + extra_len + comment_len) {
      return Corrupt("central directory entry " + std::to_string(i) + " runs past its end");
    }
    std::string_view name = b.substr(p + kCentralBytes, name_len);
    GLEANER_RETURN_IF_ERROR(
        ReadZip64Extra(b.substr(p + kCentralBytes + name_len, extra_len), &usize, &csize, &local));
    p += kCentralBytes + name_len + extra_len + comment_len;
    EntryType type = TypeOf(name, made_by, external);
    if (type != EntryType::kFile) {
      GLEANER_RETURN_IF_ERROR(out->Add(name, type, 0, {}));
      continue;
    }
    Location loc;
    loc.stored_size = csize;
    loc.method = Method(method);
    loc.has_crc = true;
    loc.crc = crc;
    // Refusals that only matter for files a dataset would read come after the path rules.
    bool hidden = false;
    if (Result<std::string> clean = SafeEntryPath(name); clean.ok()) hidden = IsHiddenPath(*clean);
    if (!hidden) {
      if ((flags & (kFlagEncrypted | kFlagStrongEncryption)) || method == kMethodAes) {
        return out->EntryError(name, "encrypted entries are not supported");
      }
      if (method != uint16_t(Method::kStored) && method != uint16_t(Method::kDeflate)) {
        return out->EntryError(name, "compression method " + std::to_string(method) +
                                         " is not supported (stored or deflate only)");
      }
      if (method == uint16_t(Method::kStored) && csize != usize) {
        return out->EntryError(name, "stored entry with different compressed and plain sizes");
      }
    }
    if (local > d->offset || d->offset - local < kLocalBytes || U32(b, local) != kLocalSig) {
      return out->EntryError(name, "local header missing or outside the archive");
    }
    size_t local_name = U16(b, local + 26), local_extra = U16(b, local + 28);
    loc.offset = local + kLocalBytes + local_name + local_extra;
    if (loc.offset > d->offset || d->offset - loc.offset < csize) {
      return out->EntryError(name, "data runs past the central directory (truncated?)");
    }
    if (b.substr(local + kLocalBytes, local_name) != name) {
      return out->EntryError(name, "local header names another file");
    }
    spans.emplace_back(local, loc.offset + csize);
    GLEANER_RETURN_IF_ERROR(out->Add(name, type, usize, loc));
  }
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); ++i) {
    if (spans[i].first < spans[i - 1].second) {
      return Corrupt("entries overlap (a zip bomb, or a damaged archive)");
    }
  }
  return Status::Ok();
}

}  // namespace gleaner::images::internal
