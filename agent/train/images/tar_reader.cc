// Tar headers: POSIX ustar (name + prefix), GNU ('L' long names, base-256 sizes) and pax ('x'
// records `path` and `size`). Only what a dataset needs; other pax keys are ignored.
#include <string>

#include "agent/train/images/archive_entries.h"

namespace gleaner::images::internal {
namespace {

constexpr size_t kBlock = 512;
constexpr uint64_t kMaxMetaBytes = 1u << 20;  // a long name or pax header

Status Corrupt(uint64_t at, const std::string& what) {
  return Status::Corruption("tar: " + what + " (header at byte " + std::to_string(at) + ")");
}

// Up to the first NUL.
std::string_view CString(std::string_view field) {
  return field.substr(0, field.find('\0'));
}

// A numeric header field: octal digits (leading spaces, ending at a space or NUL) or GNU
// base-256 (high bit of the first byte set, positive only).
bool Number(std::string_view f, uint64_t* out) {
  uint64_t v = 0;
  if (uint8_t(f[0]) == 0x80) {
    for (size_t i = 1; i < f.size(); ++i) {
      if (v >> 56) return false;
      v = v << 8 | uint8_t(f[i]);
    }
    *out = v;
    return true;
  }
  size_t i = 0;
  while (i < f.size() && f[i] == ' ') ++i;
  for (; i < f.size() && f[i] >= '0' && f[i] <= '7'; ++i) {
    if (v >> 60) return false;
    v = v << 3 | uint64_t(f[i] - '0');
  }
  for (; i < f.size(); ++i) {
    if (f[i] != ' ' && f[i] != '\0') return false;
  }
  *out = v;  // an empty (all NUL or space) field reads as 0
  return true;
}

bool ChecksumOk(std::string_view h) {
  uint64_t stored = 0;
  if (!Number(h.substr(148, 8), &stored)) return false;
  // The checksum field counts as spaces; old tars summed signed chars.
  int64_t unsigned_sum = 0, signed_sum = 0;
  for (size_t i = 0; i < kBlock; ++i) {
    bool in_field = i >= 148 && i < 156;
    unsigned_sum += in_field ? ' ' : uint8_t(h[i]);
    signed_sum += in_field ? ' ' : int8_t(h[i]);
  }
  return int64_t(stored) == unsigned_sum || int64_t(stored) == signed_sum;
}

bool AllZero(std::string_view h) {
  return h.find_first_not_of('\0') == std::string_view::npos;
}

struct Pending {  // what 'L' and 'x' headers say about the next entry
  std::string path;
  bool has_path = false;
  uint64_t size = 0;
  bool has_size = false;
};

// pax records: "<length> <key>=<value>\n", length counting the whole record.
bool ParsePax(std::string_view r, Pending* next) {
  while (!r.empty()) {
    size_t space = r.find(' ');
    if (space == 0 || space == std::string_view::npos || space > 20) return false;
    uint64_t len = 0;
    for (size_t i = 0; i < space; ++i) {
      if (r[i] < '0' || r[i] > '9') return false;
      len = len * 10 + uint64_t(r[i] - '0');
    }
    if (len <= space + 2 || len > r.size() || r[len - 1] != '\n') return false;
    std::string_view kv = r.substr(space + 1, len - space - 2);
    size_t eq = kv.find('=');
    if (eq == std::string_view::npos) return false;
    std::string_view key = kv.substr(0, eq), value = kv.substr(eq + 1);
    if (key == "path") {
      next->path = std::string(value);
      next->has_path = true;
    } else if (key == "size") {
      uint64_t v = 0;
      if (value.empty() || value.size() > 19) return false;
      for (char c : value) {
        if (c < '0' || c > '9') return false;
        v = v * 10 + uint64_t(c - '0');
      }
      next->size = v;
      next->has_size = true;
    }
    r.remove_prefix(len);
  }
  return true;
}

EntryType TypeOf(char flag, std::string_view name) {
  switch (flag) {
    case '0':
    case '\0':
    case '7':
      return !name.empty() && name.back() == '/' ? EntryType::kDirectory : EntryType::kFile;
    case '1':
      return EntryType::kHardlink;
    case '2':
      return EntryType::kSymlink;
    case '5':
      return EntryType::kDirectory;
    default:
      return EntryType::kSpecial;
  }
}

}  // namespace

Status ParseTar(std::string_view b, EntryCollector* out) {
  Pending next;
  uint64_t p = 0;
  // The archive ends with zero blocks; one that simply stops after a whole entry is accepted.
  while (p < b.size()) {
    if (b.size() - p < kBlock) return Corrupt(p, "truncated header");
    std::string_view h = b.substr(p, kBlock);
    if (AllZero(h)) break;
    if (!ChecksumOk(h)) return Corrupt(p, "header checksum mismatch (damaged, or not a tar)");
    const bool posix = h.substr(257, 6) == std::string_view("ustar\0", 6);
    if (!posix && h.substr(257, 8) != std::string_view("ustar  \0", 8)) {
      return Corrupt(p, "not a ustar header");
    }
    uint64_t size = 0;
    if (!Number(h.substr(124, 12), &size)) return Corrupt(p, "bad size field");
    const char flag = h[156];
    // Links, directories and special files carry no data, whatever their size field says.
    if (flag >= '1' && flag <= '6') size = 0;
    if (next.has_size && (flag == '0' || flag == '\0' || flag == '7')) size = next.size;
    const uint64_t data = p + kBlock;
    if (size > b.size() - data) return Corrupt(p, "entry data runs past the end (truncated)");
    const uint64_t padded = (size + kBlock - 1) / kBlock * kBlock;
    const uint64_t following = padded > b.size() - data ? b.size() : data + padded;
    if (flag == 'L' || flag == 'x' || flag == 'K' || flag == 'g') {
      if (size > kMaxMetaBytes) return Corrupt(p, "long name or pax header over 1 MiB");
      std::string_view meta = b.substr(data, size);
      if (flag == 'L') {
        next.path = std::string(CString(meta));
        next.has_path = true;
      } else if (flag == 'x' && !ParsePax(meta, &next)) {
        return Corrupt(p, "malformed pax header");
      }
      p = following;
      continue;
    }
    std::string name;
    if (next.has_path) {
      name = next.path;
    } else {
      name = std::string(CString(h.substr(0, 100)));
      std::string_view prefix = posix ? CString(h.substr(345, 155)) : std::string_view();
      if (!prefix.empty()) name = std::string(prefix) + "/" + name;
    }
    next = Pending();
    Location loc;
    loc.offset = data;
    loc.stored_size = size;
    GLEANER_RETURN_IF_ERROR(out->Add(name, TypeOf(flag, name), size, loc));
    p = following;
  }
  return Status::Ok();
}

}  // namespace gleaner::images::internal
