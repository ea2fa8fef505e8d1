// BlobStore: the built-in object store, files under <data-dir>/blobs/<key>.
//
// Keys come from signed URLs minted by the core, but the store validates them again so nothing is
// ever written outside its root: segments of [A-Za-z0-9._-] separated by single '/', no empty,
// "." or ".." segment, no leading '.', at most 512 bytes.
// A PUT streams into a temp file under <root>/.tmp while hashing (OpenSSL SHA-256) and counting;
// Commit() fsyncs, renames into place and fsyncs the directory, so a stored object is complete
// or absent, never partial. An abandoned writer removes its temp file.
// Threading: BlobStore is thread-safe; a BlobWriter belongs to one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "coordinator/native/blob/fs.h"
#include "shared/status.h"

namespace gleaner::native {

struct StoredBlob {
  int64_t size = 0;
  std::string sha256;  // lowercase hex
};

class BlobWriter {
 public:
  virtual ~BlobWriter() = default;
  // Appends body bytes. kTooLarge once the total would exceed the writer's max_size.
  virtual Status Append(const char* data, size_t len) = 0;
  // Makes the object durable under its key. expected_sha256 ("" = any) mismatch → kInvalidArgument
  // and nothing is stored. Same as Finish() then Place().
  virtual Result<StoredBlob> Commit(const std::string& expected_sha256) = 0;
  // Commit in two steps, so the caller can decide between them whether the finished object may
  // replace what is at its key: Finish() syncs the temp file and checks expected_sha256; Place()
  // renames it into place. A writer destroyed before Place() stores nothing.
  virtual Result<StoredBlob> Finish(const std::string& expected_sha256) = 0;
  virtual Status Place() = 0;
};

class BlobStore {
 public:
  // root: directory that holds the objects (created by Init()). fs must outlive the store.
  BlobStore(Fs* fs, std::string root);

  // Creates the root and its temp directory and removes temp files left by a crash.
  Status Init();

  static bool ValidKey(const std::string& key);

  // Starts writing `key` (replacing any existing object at Commit). max_size < 0: unlimited.
  Result<std::unique_ptr<BlobWriter>> BeginPut(const std::string& key, int64_t max_size);

  // Opens a stored object for reading (kNotFound when absent).
  Result<std::unique_ptr<ReadableFile>> Open(const std::string& key);

  // Removes an object; absent is ok.
  Status Delete(const std::string& key);

  const std::string& root() const { return root_; }

 private:
  Fs* fs_;
  std::string root_;
};

}  // namespace gleaner::native
