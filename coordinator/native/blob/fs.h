// Fs: the small filesystem interface the blob store and the signing key write through (leveldb
// Env style), so tests can inject failures (a failing write, fsync or rename) without touching
// the real disk. Plain file helpers (paths, durable whole-file writes) are shared/native/files.h.
//
// Errors are Status values naming the path and errno text; nothing throws. ENOSPC maps to
// Code::kNoSpace, ENOENT to Code::kNotFound, everything else to Code::kIo.
// Threading: PosixFs is stateless and thread-safe; file objects belong to one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "shared/status.h"

namespace gleaner::native {

// A file being written sequentially. Destroying it closes it (without sync).
class WritableFile {
 public:
  virtual ~WritableFile() = default;
  virtual Status Append(const char* data, size_t len) = 0;
  virtual Status Sync() = 0;   // fsync: data and metadata durable
  virtual Status Close() = 0;  // idempotent
};

// A file read at offsets (pread); safe for one reader thread.
class ReadableFile {
 public:
  virtual ~ReadableFile() = default;
  virtual int64_t size() const = 0;
  // Reads up to n bytes at offset into buf; returns the count (0 at end of file).
  virtual Result<size_t> ReadAt(int64_t offset, size_t n, char* buf) = 0;
};

class Fs {
 public:
  virtual ~Fs() = default;
  // Creates a new file (fails if it exists) with the given mode.
  virtual Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path,
                                                                int mode) = 0;
  virtual Result<std::unique_ptr<ReadableFile>> OpenReadable(const std::string& path) = 0;
  // Atomically replaces `to` with `from`.
  virtual Status Rename(const std::string& from, const std::string& to) = 0;
  // Hard link: creates `to` only if it does not exist (kConflict when it does).
  virtual Status Link(const std::string& from, const std::string& to) = 0;
  virtual Status Remove(const std::string& path) = 0;
  // fsyncs a directory so entries created or renamed in it are durable.
  virtual Status SyncDir(const std::string& dir) = 0;
  // mkdir -p; every directory it creates is made durable in its parent.
  virtual Status CreateDirs(const std::string& dir) = 0;
  virtual bool Exists(const std::string& path) = 0;
};

// The real filesystem (POSIX calls, EINTR retried).
Fs* DefaultFs();

// Reads a whole (small) file through fs.
Result<std::string> ReadWholeFile(Fs* fs, const std::string& path);

}  // namespace gleaner::native
