// Dataset archives: the files of a zip, tar or tar.gz file (or of a directory), read safely.
//
// Formats: zip (stored and deflate entries, zip64), tar (POSIX ustar, GNU long names, pax
// `path`/`size` records), tar inside gzip. The format is told by the first bytes.
// Refused, with a Status naming the entry: encrypted zip entries, split (multi-disk) zips,
// other compression methods, absolute paths, drive letters, backslashes, `..` components,
// entries whose data lies outside the archive or overlaps another's (the overlapping-entry zip
// bomb), and anything over `ArchiveLimits`, which is checked on the declared sizes before
// anything is inflated (then inflation stops at the declared size). Skipped with a note:
// symbolic and hard links (never followed), device and other special entries. Skipped
// silently: directories, `__MACOSX/` and every path with a component starting with '.'.
// Paths are normalised ("./a//b.jpg" -> "a/b.jpg"); a path appearing twice is refused.
//
// Ownership: OpenArchive views `bytes`, which must outlive the FileSet; OpenArchiveFile maps the
// file and owns the mapping. A FileSet is immutable after opening; Read() may be called from
// several threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "shared/status.h"

namespace gleaner::images {

struct ArchiveLimits {
  int64_t max_entries = 10000;              // files (directories and skipped entries not counted)
  uint64_t max_entry_bytes = 256ull << 20;  // one file, uncompressed
  uint64_t max_total_bytes = 4ull << 30;    // all files, uncompressed
  uint64_t max_ratio = 100;                 // uncompressed : compressed, above kRatioFloorBytes
};
// Entries (and gzip streams) smaller than this are exempt from the ratio check.
constexpr uint64_t kRatioFloorBytes = 1u << 20;

struct ArchiveFile {
  std::string path;  // normalised, relative, '/'-separated
  uint64_t size = 0;
};

class FileSet {
 public:
  virtual ~FileSet() = default;
  // Regular files, sorted by path (byte order).
  const std::vector<ArchiveFile>& files() const { return files_; }
  // One line per skipped link or special entry ("a/b: symbolic link, not followed").
  const std::vector<std::string>& notes() const { return notes_; }
  // The first min(size, max_bytes) bytes of files()[i]; a whole file is checked against its
  // CRC where the format has one. Errors say what is wrong; the caller names the file.
  virtual Result<std::string> Read(size_t i, uint64_t max_bytes = UINT64_MAX) const = 0;

 protected:
  std::vector<ArchiveFile> files_;
  std::vector<std::string> notes_;
};

// True when the first bytes look like a zip, tar or gzip file.
bool LooksLikeArchive(std::string_view head);
Result<std::unique_ptr<FileSet>> OpenArchive(std::string_view bytes, const ArchiveLimits& limits);
Result<std::unique_ptr<FileSet>> OpenArchiveFile(const std::string& path,
                                                 const ArchiveLimits& limits);
// The regular files below `dir` under the same rules (symbolic links noted, never followed).
Result<std::unique_ptr<FileSet>> OpenDirectory(const std::string& dir, const ArchiveLimits& limits);

// The normalised form of an entry name, or kInvalidArgument when it is unsafe (see above).
// "" for a name that is only the root ("./").
Result<std::string> SafeEntryPath(std::string_view raw);
// True for `__MACOSX/...` and for paths with a component starting with '.'.
bool IsHiddenPath(std::string_view path);

}  // namespace gleaner::images
