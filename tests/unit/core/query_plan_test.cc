// No statement on a hot path (submission, claim, heartbeat, checkpoint commit, completion,
// failure, release, cancel, the caller lookup and the maintenance tick) scans a table or an index
// whole: its cost must not grow with the number of jobs, nodes, segments or bans. Every
// statement those routes run is explained (EXPLAIN QUERY PLAN) on a database that holds
// thousands of rows and ANALYZE statistics; a SCAN of a table that grows is a failure.
#include <cstdio>
#include <cstdlib>
#include <set>

#include "tests/unit/core/test_env.h"

using namespace gleaner;
using namespace gleaner::testing;

namespace {

// Runs batches on the test database and explains every statement first.
class ExplainingExecutor : public core::SqlExecutor {
 public:
  explicit ExplainingExecutor(core::SqlExecutor* db) : db_(db) {}
  core::BatchResult Execute(const core::Batch& batch) override {
    // Batch::writes() (the core's rule, from its SQL text) against SQLite's own answer: a
    // statement writes when its program opens a write transaction (EXPLAIN: Transaction p2 != 0,
    // what sqlite3_stmt_readonly reads).
    bool sqlite_writes = false;
    for (const core::Statement& s : batch.statements) {
      core::Batch program;
      program.Add("EXPLAIN " + s.sql, s.params);
      core::BatchResult r = db_->Execute(program);
      REQUIRE(r.status.ok());
      for (size_t i = 0; i < r.results[0].rows.size(); ++i) {
        if (r.results[0].Get(i, "opcode").AsText() == "Transaction" &&
            r.results[0].Get(i, "p2").AsInt() != 0) {
          sqlite_writes = true;
        }
      }
    }
    INFO(batch.statements.front().sql);
    CHECK(batch.writes() == sqlite_writes);
    for (const core::Statement& s : batch.statements) {
      core::Batch explain;
      explain.Add("EXPLAIN QUERY PLAN " + s.sql, s.params);
      core::BatchResult r = db_->Execute(explain);
      REQUIRE(r.status.ok());
      std::string plan;
      for (size_t i = 0; i < r.results[0].rows.size(); ++i) {
        plan += r.results[0].Get(i, "detail").AsText() + "\n";
      }
      plans.push_back({s.sql, plan});
    }
    return db_->Execute(batch);
  }
  std::vector<std::pair<std::string, std::string>> plans;

 private:
  core::SqlExecutor* db_;
};

// Aliases the core's SQL gives growing tables, and the tables themselves.
bool IsGrowingTable(const std::string& name) {
  static const std::set<std::string> kNames = {
      "jobs",     "segments", "nodes", "job_bans", "checkpoints", "uploads", "blobs",
      "api_keys", "j",        "s",     "n",        "b",           "u"};
  return kNames.count(name) > 0;
}

// Scans that are deliberate: the maintenance tick counts the active nodes seen within
// stall_after, which is O(fleet) (an index on last_seen_at would cost every heartbeat a write).
bool Allowed(const std::string& sql, const std::string& line) {
  return line == "SCAN nodes" && sql.find(" AS seen") != std::string::npos;
}

// The plan lines that read a growing table or one of its indexes from end to end.
std::string Scans(const std::string& sql, const std::string& plan) {
  std::string out;
  size_t at = 0;
  while ((at = plan.find("SCAN ", at)) != std::string::npos) {
    size_t eol = plan.find('\n', at);
    std::string line = plan.substr(at, eol - at);
    size_t end = line.find(' ', 5);
    if (IsGrowingTable(line.substr(5, end == std::string::npos ? std::string::npos : end - 5)) &&
        !Allowed(sql, line)) {
      out += line + "\n";
    }
    at = eol;
  }
  // A skip-scan ("ANY(col)") walks one index entry per distinct leading value: it grows too.
  for (at = 0; (at = plan.find("ANY(", at)) != std::string::npos; ++at) {
    out += plan.substr(plan.rfind('\n', at) + 1, plan.find('\n', at) - plan.rfind('\n', at) - 1) +
           "\n";
  }
  return out;
}

}  // namespace

TEST_CASE("hot-path statements search indexes and scan nothing that grows", "[plans]") {
  TestEnv env;
  std::string dev = env.Developer();
  // A few thousand rows in every table the hot paths touch (jobs of the operator, who has no
  // limit), and statistics about them.
  env.Submit(env.operator_token);
  env.Query(
      "WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i < 4999) "
      "INSERT INTO jobs (id, owner_key_id, kind, spec, state, priority, max_failures, "
      "min_vram_mb, steps_total, created_at, updated_at, node_id, lease_epoch, lease_nonce, "
      "lease_expires_at) SELECT printf('j_x%05d', i), owner_key_id, kind, spec, "
      "CASE WHEN i % 10 < 8 THEN 'pending' WHEN i % 10 = 8 THEN 'running' ELSE 'completed' END, "
      "priority, max_failures, min_vram_mb, steps_total, created_at + i, updated_at, "
      "CASE WHEN i % 10 = 8 THEN printf('n_x%04d', i % 1000) END, "
      "CASE WHEN i % 10 < 8 THEN 0 ELSE 1 END, "
      "CASE WHEN i % 10 < 8 THEN NULL ELSE printf('nonce%05d', i) END, "
      "CASE WHEN i % 10 = 8 THEN ? END FROM jobs, s LIMIT 5000",
      {env.now_ms + 3600000});
  env.Query(
      "WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i < 999) "
      "INSERT INTO nodes (id, machine_id, token_hash, gpu_name, vram_mb, agent_version, "
      "registered_at, last_seen_at) SELECT printf('n_x%04d', i), printf('mx%04d', i), "
      "printf('hash%04d', i), 'RTX 4090', 24000, '0', 0, 0 FROM s");
  env.Query(
      "INSERT INTO segments (job_id, epoch, node_id, gpu_name, usd_per_hour, "
      "heartbeat_interval_s, started_at, step_start, step_end, step_committed, ended_at) "
      "SELECT id, lease_epoch, COALESCE(node_id, 'n_x0000'), 'RTX 4090', 0.3, 30, 0, 0, 0, 0, "
      "CASE state WHEN 'running' THEN NULL ELSE 5 END FROM jobs WHERE state <> 'pending'");
  env.Query(
      "INSERT INTO job_bans (job_id, node_id, reason, at) SELECT id, 'n_x0001', 'x', created_at "
      "FROM jobs WHERE state = 'completed'");
  env.Query("ANALYZE");

  NodeRef node = env.Node("plans");
  ExplainingExecutor explaining(env.db.get());
  env.executor = &explaining;
  std::string job;
  {
    env.Submit(dev);
    env.Submit(env.operator_token);
    job = env.ClaimedJob(node);
    REQUIRE(env.Heartbeat(node, job, 1, 3).status == 200);
    REQUIRE(env.Checkpoint(node, job, 1, 10).status == 200);
    REQUIRE(env.Checkpoint(node, job, 1, 20).status == 200);
    REQUIRE(env.Checkpoint(node, job, 1, 30).status == 200);
    REQUIRE(env.Checkpoint(node, job, 1, 40).status == 200);
    REQUIRE(env.Post("/v1/jobs/" + job + "/release", node.token, {{"epoch", 1}}).status == 200);
    job = env.ClaimedJob(node);
    REQUIRE(
        env.Post("/v1/jobs/" + job + "/fail", node.token, {{"epoch", 2}, {"reason", "x"}}).status ==
        200);
    job = env.ClaimedJob(node);
    REQUIRE(env.Complete(node, job, 1).status == 200);
    std::string other = env.Submit(dev);
    REQUIRE(env.Post("/v1/jobs/" + other + "/cancel", dev).status == 200);
    REQUIRE(env.Post("/v1/admin/maintenance", env.operator_token).status == 200);
  }
  env.executor = nullptr;
  std::set<std::string> seen;
  int bad = 0;
  for (const auto& [sql, plan] : explaining.plans) {
    if (!seen.insert(sql).second) continue;
    if (getenv("GLEANER_PRINT_PLANS")) std::printf("%s\n%s\n", sql.c_str(), plan.c_str());
    std::string scans = Scans(sql, plan);
    if (!scans.empty()) {
      ++bad;
      UNSCOPED_INFO("statement: " << sql << "\nscans:\n" << scans);
    }
  }
  CHECK(seen.size() > 30);
  CHECK(bad == 0);
}
