// Consistency checks of a coordinator's durable state (its SQLite database and built-in blob
// store), for black-box tests that crash or break the real process and then look at what is left.
//
// CheckStore() opens the database with its own connection (safe while the coordinator runs: WAL)
// and reports every problem it finds as one readable line:
//   - PRAGMA integrity_check is not "ok";
//   - a blobs row whose object file is missing or differs in size or sha256;
//   - a checkpoints row without a blobs row of the same sha256 and size (metadata pointing at a
//     missing object), a job whose latest checkpoint has no checkpoints row, a completed job's
//     output without its blobs row;
//   - an epoch without its segment, or more than one open segment of a job;
//   - (optionally) a temp file left in the store's .tmp directory;
//   - (optionally) a checkpoint that cannot be downloaded through a signed GET URL with exactly
//     its committed bytes.
// Errors are returned, never thrown; tests CHECK that the list is empty.
#pragma once

#include <set>
#include <string>
#include <vector>

namespace gleaner::testing {

struct StoreCheckOptions {
  std::string db;        // database file
  std::string data_dir;  // the coordinator's --data-dir (blobs/ and signing.key inside)
  // Non-empty: download checkpoints through GET <base_url>/blobs/<key>?<signed query>.
  std::string base_url;
  // Objects verified earlier (file read and, for checkpoints, downloaded) and unchanged on disk
  // since (same key, sha256, inode, mtime and size) are skipped; objects verified by this call
  // are added. nullptr: verify everything.
  std::set<std::string>* verified = nullptr;
  bool expect_no_temp_files = false;  // nothing is being uploaded: .tmp must be empty
};

struct StoreCheckResult {
  std::vector<std::string> problems;
  int blobs = 0;        // blobs rows checked against their files
  int checkpoints = 0;  // checkpoints rows
  int downloads = 0;    // checkpoints downloaded through HTTP
  int skipped = 0;      // unchanged since an earlier check (see verified)
};

StoreCheckResult CheckStore(const StoreCheckOptions& options);

// Keys of every object file in the store (relative to <data_dir>/blobs, temp directory left out),
// sorted.
std::vector<std::string> ListObjects(const std::string& data_dir);

// One line per problem, for INFO().
std::string JoinLines(const std::vector<std::string>& lines, size_t max = 30);

}  // namespace gleaner::testing
