// Per-job caches on this node: <state>/job-cache/<job>/ (StateDir::JobCacheDir), kept across the
// job's leases here and passed to the trainer as `--cache-dir` for what is costly to recompute
// (lora-sd: the photos encoded at job start). The trainer writes there durably and validates
// what it finds before reuse; the agent only creates, marks and removes the directories.
//
// Lifetime: the job runner removes a job's cache when the job ends for this node (completed,
// failed, canceled). Any other cache (the job was released, lost, or never comes back) is
// removed once unused for kJobCacheMaxIdleS: PruneJobCaches runs at agent start and after each
// job. "Used" is the directory's mtime, set by OpenJobCache at every lease.
//
// Errors: OpenJobCache returns a Status (the runner then runs the trainer without a cache dir).
// PruneJobCaches is best effort: what it cannot read or remove is logged and left; an entry
// that is not a directory (a stray file, a symlink) is removed, never followed. Not thread-safe;
// the agent calls both from its main loop.
#pragma once

#include <cstdint>
#include <string>

#include "shared/status.h"

namespace gleaner::agent {

constexpr int64_t kJobCacheMaxIdleS = 7 * 24 * 3600;

// Creates `dir` (0700) if needed, replacing anything there that is not a directory, and marks
// it used now.
Status OpenJobCache(const std::string& dir);

// Removes the entries of `root` (the job-cache directory) not used within max_idle_s of now_s
// (Unix seconds), and any entry that is not a directory. Returns how many were removed.
int PruneJobCaches(const std::string& root, int64_t now_s, int64_t max_idle_s = kJobCacheMaxIdleS);

}  // namespace gleaner::agent
