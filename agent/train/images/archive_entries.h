// Internal to agent/train/images: what the zip and tar parsers hand to the common archive code.
//
// A parser walks its format's headers and calls EntryCollector::Add for every entry; the
// collector applies the path rules and limits of archive.h and keeps where each file's bytes
// are. Archive (archive.cc) then reads them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "agent/train/images/archive.h"

namespace gleaner::images::internal {

enum class EntryType { kFile, kDirectory, kSymlink, kHardlink, kSpecial };

enum class Method : uint16_t { kStored = 0, kDeflate = 8 };

// Where an entry's bytes are in the archive.
struct Location {
  uint64_t offset = 0;       // first byte of the (compressed) data
  uint64_t stored_size = 0;  // bytes at offset
  Method method = Method::kStored;
  bool has_crc = false;
  uint32_t crc = 0;
};

class EntryCollector {
 public:
  EntryCollector(const char* format, const ArchiveLimits& limits)
      : format_(format), limits_(limits) {}
  // Error (naming the entry) for an unsafe name or a limit exceeded.
  Status Add(std::string_view raw_name, EntryType type, uint64_t size, const Location& loc);
  // Sorts by path; error on a duplicate path.
  Status Finish();
  // "zip entry \"name\": " + what
  Status EntryError(std::string_view raw_name, const std::string& what,
                    Code code = Code::kInvalidArgument) const;

  std::vector<ArchiveFile> files;
  std::vector<Location> locations;  // parallel to files
  std::vector<std::string> notes;

 private:
  const char* format_;
  ArchiveLimits limits_;
  uint64_t total_ = 0;
};

// Parse headers into the collector; bytes is the whole archive.
Status ParseZip(std::string_view bytes, EntryCollector* out);
Status ParseTar(std::string_view bytes, EntryCollector* out);

// Inflates a raw deflate stream (zip method 8) of exactly `size` bytes of output; with
// max_bytes < size stops early and returns the first max_bytes (inflate.cc).
Result<std::string> InflateRaw(std::string_view in, uint64_t size, uint64_t max_bytes);
// Decompresses a gzip stream (a .tar.gz) with the limits' total size and ratio guard applied as
// it goes, so a gzip bomb stops early (inflate.cc).
Result<std::string> Gunzip(std::string_view in, const ArchiveLimits& limits);

}  // namespace gleaner::images::internal
