// Content-addressed cache of job inputs (datasets, base models): files named by their SHA-256
// under one directory, capped in total size with least-recently-used eviction (mtime = last use).
//
// Contract: Fetch() returns a path whose content has been verified against sha256 (and size when
// known) at insertion; a download that does not match is deleted and reported as kCorruption.
// A download that breaks off (connection cut, agent killed) leaves "<sha256>.part"; the next
// Fetch of that object asks only for the rest (HTTP Range) and verifies the whole file.
// A file in use by the current job is never evicted by that job's own fetches. Thread-safe
// (downloads are serialised).
#pragma once

#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "agent/supervisor/api.h"

namespace gleaner::agent {

class BlobCache {
 public:
  BlobCache(std::string dir, int64_t max_bytes) : dir_(std::move(dir)), max_bytes_(max_bytes) {}

  // Local path of `obj`, downloading it (through api) when missing.
  Result<std::string> Fetch(CoordinatorApi* api, const RemoteObject& obj);
  // Evicts least-recently-used files (cut-off downloads included) until the total is within
  // the cap, keeping `keep`.
  void Evict(const std::set<std::string>& keep);

 private:
  std::string dir_;
  int64_t max_bytes_;
  std::mutex mu_;        // the directory's entries
  std::mutex fetch_mu_;  // one download at a time (a .part file has one writer)
};

// Materialises a folder input: each file is hard-linked (or, across file systems, copied) from
// `cached` to dir/<path>. dir is emptied first. `paths` and `cached` have the same length.
Status MaterializeFolder(const std::string& dir, const std::vector<std::string>& paths,
                         const std::vector<std::string>& cached);

// Downloads url into path and checks sha256 (and size when >= 0); on mismatch path is removed.
// A known size caps the transfer: it stops before the first byte past it is written (and a
// larger Content-Length is refused before the body); path is removed (kCorruption).
// With resume, bytes already in path (an interrupted earlier call) are kept and only the rest
// is asked for; a transport failure keeps what arrived for the next call. remote: url is not
// the coordinator's (RemoteObject::remote): fetched behind the address guard.
Status DownloadVerified(CoordinatorApi* api, const std::string& url, const std::string& sha256,
                        int64_t size, const std::string& path, bool resume = false,
                        bool remote = false);

}  // namespace gleaner::agent
