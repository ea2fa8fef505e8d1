#include "tests/integration/ack_log.h"

#include "coordinator/native/db/sqlite_executor.h"
#include "shared/sha256.h"
#include "tests/integration/harness.h"
#include "tests/integration/store_check.h"

namespace gleaner::testing {

namespace {

std::string Str(const core::SqlValue& v) {
  return v.is_null() ? "" : v.AsText();
}

}  // namespace

void AckLog::Put(const std::string& key, const std::string& body) {
  std::lock_guard<std::mutex> lock(mu);
  puts[key].insert(Sha256Hex(body));
}

void AckLog::Violation(const std::string& v) {
  std::lock_guard<std::mutex> lock(mu);
  if (violations.size() < 50) violations.push_back(v);
}

std::vector<std::string> CheckAgainstLog(AckLog* log, const std::string& db_path,
                                         const std::string& data_dir, int keep_checkpoints,
                                         std::set<std::string>* whole) {
  std::vector<std::string> problems;
  auto db = native::SqliteExecutor::Open({db_path});
  if (!db.ok()) return {"open database: " + db.status().ToString()};
  core::Batch b;
  b.Add(
      "SELECT id, state, lease_epoch, node_id, lease_expires_at, ckpt_step, ckpt_sha256 FROM jobs");
  b.Add(
      "SELECT job_id, epoch, node_id, started_at, heartbeats, step_end, ended_at, end_reason "
      "FROM segments ORDER BY job_id, epoch");
  b.Add("SELECT job_id, step, epoch, sha256, size FROM checkpoints");
  b.Add("SELECT id, outputs FROM jobs WHERE state = 'completed'");
  auto r = (*db)->Execute(b);
  if (!r.status.ok()) return {"read database: " + r.status.ToString()};
  struct JobRow {
    std::string state, node;
    int64_t epoch = 0, expires = 0, ckpt_step = -1;
    std::string ckpt_sha, outputs;
  };
  struct SegRow {
    std::string node, end_reason;
    int64_t started = 0, heartbeats = 0, step_end = 0;
    bool ended = false;
  };
  std::map<std::string, JobRow> jobs;
  for (const auto& row : r.results[0].rows) {
    JobRow& j = jobs[Str(row[0])];
    j.state = Str(row[1]);
    j.epoch = row[2].AsInt();
    j.node = Str(row[3]);
    j.expires = row[4].is_null() ? 0 : row[4].AsInt();
    j.ckpt_step = row[5].is_null() ? -1 : row[5].AsInt();
    j.ckpt_sha = Str(row[6]);
  }
  std::map<std::string, std::map<int64_t, SegRow>> segs;
  for (const auto& row : r.results[1].rows) {
    SegRow& s = segs[Str(row[0])][row[1].AsInt()];
    s.node = Str(row[2]);
    s.started = row[3].AsInt();
    s.heartbeats = row[4].AsInt();
    s.step_end = row[5].AsInt();
    s.ended = !row[6].is_null();
    s.end_reason = Str(row[7]);
  }
  std::map<std::pair<std::string, int64_t>, std::pair<std::string, int64_t>> ckpts;
  std::map<std::string, std::vector<int64_t>> ckpt_steps;
  for (const auto& row : r.results[2].rows) {
    ckpts[{Str(row[0]), row[1].AsInt()}] = {Str(row[3]), row[4].AsInt()};
    ckpt_steps[Str(row[0])].push_back(row[1].AsInt());
  }
  for (const auto& row : r.results[3].rows) jobs[Str(row[0])].outputs = Str(row[1]);

  std::lock_guard<std::mutex> lock(log->mu);
  // Every object in the store, with or without metadata, is whole: exactly one of the bodies
  // PUT to its key (never a prefix of one, never a temp file under an object's key).
  for (const std::string& key : ListObjects(data_dir)) {
    if (whole->count(key)) continue;
    auto sent = log->puts.find(key);
    std::string sha = Sha256Hex(ReadFile(data_dir + "/blobs/" + key));
    if (sent == log->puts.end() || !sent->second.count(sha)) {
      problems.push_back("object " + key + " (sha256 " + sha + ") is not a body PUT to it");
    } else {
      whole->insert(key);
    }
  }
  for (const std::string& id : log->jobs) {
    if (!jobs.count(id)) problems.push_back("acknowledged job " + id + " is gone");
  }
  for (const auto& [key, ack] : log->leases) {
    const auto& [id, epoch] = key;
    const std::string what = id + " epoch " + std::to_string(epoch);
    auto seg = segs[id].find(epoch);
    if (seg == segs[id].end()) {
      problems.push_back("acknowledged lease " + what + " has no segment");
      continue;
    }
    const SegRow& s = seg->second;
    const JobRow& j = jobs[id];
    if (s.node != ack.node) problems.push_back(what + " segment names node " + s.node);
    if (s.heartbeats < ack.heartbeats || s.step_end < ack.max_step) {
      problems.push_back(what + " segment has " + std::to_string(s.heartbeats) +
                         " heartbeats up to step " + std::to_string(s.step_end) + ", " +
                         std::to_string(ack.heartbeats) + " up to step " +
                         std::to_string(ack.max_step) + " were acknowledged");
    }
    if (j.epoch < epoch) {
      problems.push_back(what + ": the job's lease_epoch went back to " + std::to_string(j.epoch));
    }
    if (ack.released && !(s.ended && s.end_reason == "released")) {
      problems.push_back(what + " release was acknowledged; segment says " + s.end_reason);
    }
    if (ack.completed && !(j.state == "completed" && s.end_reason == "completed")) {
      problems.push_back(what + " completion was acknowledged; job is " + j.state);
    }
    if (ack.end_sent) continue;
    // Nobody else may hold the job before this acknowledged lease has expired.
    for (const auto& [later, ls] : segs[id]) {
      if (later > epoch && ls.started <= ack.expires_ms) {
        problems.push_back(what + " acknowledged until " + std::to_string(ack.expires_ms) +
                           " but epoch " + std::to_string(later) + " started at " +
                           std::to_string(ls.started) + " on " + ls.node);
      }
    }
    if (j.epoch == epoch && j.state == "running" && j.expires < ack.expires_ms) {
      problems.push_back(what + " lease expiry went back from " + std::to_string(ack.expires_ms) +
                         " to " + std::to_string(j.expires));
    }
  }
  for (const CommitAck& c : log->commits) {
    const std::string what = c.job + " checkpoint " + std::to_string(c.step);
    const JobRow& j = jobs[c.job];
    if (j.ckpt_step < c.step) {
      problems.push_back(what + " was acknowledged; the job's latest is " +
                         std::to_string(j.ckpt_step));
    }
    auto it = ckpts.find({c.job, c.step});
    if (it != ckpts.end()) {
      if (it->second.first != c.sha || it->second.second != c.size) {
        problems.push_back(what + " row differs from the acknowledged commit");
      }
      continue;
    }
    int newer = 0;
    for (int64_t s : ckpt_steps[c.job]) newer += s > c.step;
    if (newer < keep_checkpoints) {
      problems.push_back(what + " is gone with only " + std::to_string(newer) + " newer ones");
    }
  }
  for (const auto& [id, sha] : log->completes) {
    const JobRow& j = jobs[id];
    if (j.state != "completed" || j.outputs.find(sha) == std::string::npos) {
      problems.push_back("completion of " + id + " was acknowledged; job is " + j.state +
                         " with outputs " + j.outputs);
    }
  }
  return problems;
}

}  // namespace gleaner::testing
