// Content-addressed cache of job inputs (datasets, base models): files named by their SHA-256
// under one directory, capped in total size with least-recently-used eviction (mtime = last use).
//
// Contract: Fetch() returns a path whose content has been verified against sha256 (and size when
// known) at insertion; a download that does not match is deleted and reported as kCorruption.
// A file in use by the current job is never evicted by that job's own fetches. Thread-safe.
#pragma once

#include <cstdint>
#include <mutex>
#include <set>
#include <string>

#include "agent/supervisor/api.h"

namespace gleaner::agent {

class BlobCache {
 public:
  BlobCache(std::string dir, int64_t max_bytes) : dir_(std::move(dir)), max_bytes_(max_bytes) {}

  // Local path of `obj`, downloading it (through api) when missing.
  Result<std::string> Fetch(CoordinatorApi* api, const RemoteObject& obj);
  // Evicts least-recently-used files until the total is within the cap, keeping `keep`.
  void Evict(const std::set<std::string>& keep);

 private:
  std::string dir_;
  int64_t max_bytes_;
  std::mutex mu_;
};

// Downloads url into path and checks sha256 (and size when >= 0); on mismatch path is removed.
Status DownloadVerified(CoordinatorApi* api, const std::string& url, const std::string& sha256,
                        int64_t size, const std::string& path);

}  // namespace gleaner::agent
