// Small POSIX file helpers: the one set the native programs share (gleaner-agent, gleaner-train,
// gleaner-coordinator, gleaner-release). Never libtorch; never in the wasm build.
//
// Contract: every function reports failure as a Status (kIo with the path and errno text),
// never throws, never aborts. "Durable" means the data is on disk before the call returns:
// temp file + fsync + rename + fsync of the parent directory. Thread-safe (no shared state).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "shared/status.h"

namespace gleaner::files {

struct FileDigest {
  int64_t size = 0;
  std::string sha256;  // lowercase hex
};

// Writes bytes to path (truncating), fsyncs the file. Not atomic; use inside a temp directory.
Status WriteSynced(const std::string& path, std::string_view bytes, int mode = 0644);
// Atomically replaces path with bytes: path.tmp, fsync, rename, fsync parent directory. On
// failure path holds its old bytes or the new ones, never a mix, and path.tmp is removed.
Status WriteDurable(const std::string& path, std::string_view bytes, int mode = 0644);
// Reads a whole file; kNotFound if it does not exist, kTooLarge over max_size.
Result<std::string> ReadAll(const std::string& path, int64_t max_size = int64_t(1) << 30);
// Size and SHA-256 of a file, streamed.
Result<FileDigest> Digest(const std::string& path);
// fsync of a file or a directory.
Status Fsync(const std::string& path);
// Renames and fsyncs the parent of `to`.
Status RenameDurable(const std::string& from, const std::string& to);
// mkdir -p.
Status MakeDirs(const std::string& path, int mode = 0755);
// rm -rf; ok when the path does not exist.
Status RemoveTree(const std::string& path);
bool Exists(const std::string& path);
bool IsDir(const std::string& path);
// Plain names (no "." / "..") of the entries of a directory, sorted.
Result<std::vector<std::string>> ListDir(const std::string& dir);
// "a/b" + "c" -> "a/b/c".
std::string Join(const std::string& a, const std::string& b);
// Directory part of a path ("." when none).
std::string Dirname(const std::string& path);

}  // namespace gleaner::files
