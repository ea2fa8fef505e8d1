// AckLog: what clients of a coordinator were told (every 2xx answer), for crash tests that kill
// the coordinator and then check that nothing acknowledged was lost.
//
// Clients record into it under `mu`; CheckAgainstLog() compares it with the database and the
// blob store while no client is running (so the log is complete):
//   - every acknowledged job exists;
//   - every acknowledged lease has its segment, on its node, with at least the acknowledged
//     heartbeats and step; the job's epoch never went back; acknowledged releases and
//     completions are there;
//   - no later lease of a job started before an earlier one's acknowledged expiry (unless its
//     holder gave it up): a job is never held by two nodes;
//   - every acknowledged checkpoint commit is the job's latest or older than it, and its row is
//     there unless pruned behind keep_checkpoints newer ones;
//   - every object in the store is exactly one of the bodies PUT to its key (never partial).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace gleaner::testing {

struct LeaseAck {
  std::string node;
  int64_t expires_ms = 0;  // latest acknowledged expiry
  int heartbeats = 0;
  int64_t max_step = 0;
  bool end_sent = false;  // the holder sent release/complete (it may have taken effect)
  bool released = false;
  bool completed = false;
};

struct CommitAck {
  std::string job;
  int64_t epoch, step;
  std::string sha;
  int64_t size;
};

// Everything acknowledged with a 2xx, and what clients saw that must never happen.
struct AckLog {
  std::mutex mu;
  std::set<std::string> jobs;
  std::map<std::pair<std::string, int64_t>, LeaseAck> leases;
  std::map<std::string, int64_t> max_epoch;
  std::vector<CommitAck> commits;
  std::map<std::string, std::string> completes;       // job -> output sha256
  std::map<std::string, std::set<std::string>> puts;  // key -> sha256 of every body PUT to it
  std::vector<std::string> violations;
  int lost_leases = 0, vanished = 0, releases = 0, resumes = 0;

  // Records a body about to be PUT to key.
  void Put(const std::string& key, const std::string& body);
  // Records something a client saw that must never happen (the first 50).
  void Violation(const std::string& v);
};

// Problems found, one line each. whole: keys of objects already found whole, skipped (objects are
// never rewritten with other bytes in these tests); keys found whole now are added.
std::vector<std::string> CheckAgainstLog(AckLog* log, const std::string& db_path,
                                         const std::string& data_dir, int keep_checkpoints,
                                         std::set<std::string>* whole);

}  // namespace gleaner::testing
