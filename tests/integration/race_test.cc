// Two coordinator processes on one database file, 16 concurrent node clients speaking the node
// protocol over HTTP, 1000 synthetic jobs: every (job, epoch) is held by exactly one node, a job
// never runs on two nodes at once, and every job completes exactly once.
#include <atomic>
#include <catch2/catch.hpp>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "coordinator/native/db/sqlite_executor.h"
#include "shared/sha256.h"
#include "tests/integration/coordinator_fixture.h"
#include "tests/integration/harness.h"

using namespace gleaner;
using namespace gleaner::testing;

namespace {

constexpr int kJobs = 1000;
constexpr int kClaimers = 16;

struct Shared {
  std::mutex mu;
  std::set<std::pair<std::string, int64_t>> held;  // every (job, epoch) handed out
  std::map<std::string, std::string> running_on;   // job → node currently holding it
  std::vector<std::string> violations;
  std::atomic<int> completed{0};
  std::atomic<int> released{0};
  std::atomic<int> server_errors{0};

  void Violation(const std::string& v) {
    std::lock_guard<std::mutex> lock(mu);
    if (violations.size() < 20) violations.push_back(v);
  }
};

// One node: claims, heartbeats, uploads its output and completes (or sometimes releases).
void Claimer(int index, const std::vector<std::string>& urls, const NodeCredentials& node,
             Shared* shared, std::chrono::steady_clock::time_point deadline) {
  std::vector<HttpClient> clients;
  for (const std::string& url : urls) {
    clients.emplace_back(url);
    clients.back().set_token(node.token);
  }
  std::mt19937 rng(uint32_t(1234 + index));
  size_t turn = size_t(index);
  auto next = [&]() -> HttpClient& { return clients[turn++ % clients.size()]; };
  auto check = [&](const HttpResult& r, int want, const std::string& what) {
    if (r.status >= 500 || r.status == 0) shared->server_errors++;
    if (r.status != want) shared->Violation(node.id + " " + what + ": " + r.Describe());
    return r.status == want;
  };

  while (shared->completed.load() < kJobs && std::chrono::steady_clock::now() < deadline) {
    HttpResult work = next().Post("/v1/work", Json::object());
    if (work.status == 204) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));  // idle poll; no work yet
      continue;
    }
    if (!check(work, 200, "work")) continue;
    Json w = work.json();
    std::string job = w["job"]["id"].get<std::string>();
    int64_t epoch = w["lease"]["epoch"].get<int64_t>();
    int64_t steps = w["job"]["steps"].get<int64_t>();
    {
      std::lock_guard<std::mutex> lock(shared->mu);
      if (!shared->held.insert({job, epoch}).second) {
        shared->violations.push_back(job + " epoch " + std::to_string(epoch) + " handed out twice");
      }
      auto [it, fresh] = shared->running_on.emplace(job, node.id);
      if (!fresh) {
        shared->violations.push_back(job + " claimed by " + node.id + " while running on " +
                                     it->second);
      }
    }
    Json hb = {{"epoch", epoch}, {"step", steps}};
    HttpResult beat = next().Post("/v1/jobs/" + job + "/heartbeat", hb);
    check(beat, 200, "heartbeat " + job);
    if (beat.json().value("cancel", false)) shared->Violation(job + " unexpectedly canceled");

    const std::string base = "/v1/jobs/" + job;
    if (rng() % 10 == 0) {
      // An interruption: back to the queue; another node (or this one) continues it.
      {
        std::lock_guard<std::mutex> lock(shared->mu);
        shared->running_on.erase(job);
      }
      if (check(next().Post(base + "/release", {{"epoch", epoch}, {"reason", "test"}}), 200,
                "release " + job)) {
        shared->released++;
      }
      continue;
    }
    HttpResult out = next().Post(base + "/outputs", {{"epoch", epoch}, {"name", "chain.txt"}});
    if (!check(out, 200, "outputs " + job)) continue;
    std::string bytes = "chain " + job + "\n";
    HttpResult put = HttpClient::Fetch("PUT", out.json()["url"].get<std::string>(), bytes);
    if (put.status / 100 != 2) {
      shared->Violation("PUT output of " + job + ": " + put.Describe());
      continue;
    }
    {
      std::lock_guard<std::mutex> lock(shared->mu);
      shared->running_on.erase(job);
    }
    Json done = {{"epoch", epoch},
                 {"outputs", Json::array({{{"name", "chain.txt"},
                                           {"sha256", Sha256Hex(bytes)},
                                           {"size", int64_t(bytes.size())}}})}};
    if (check(next().Post(base + "/complete", done), 200, "complete " + job)) shared->completed++;
  }
}

}  // namespace

TEST_CASE("two coordinators, 16 claimers, 1000 jobs: no double assignment", "[coordinator][race]") {
  // Thousands of small files: keep them in RAM (this test is about concurrency, not disks).
  TempDir dir("gleaner-race", MemoryTempBase());
  REQUIRE(!dir.path().empty());
  CoordinatorOptions a, b;
  a.name = "a";
  b.name = "b";
  // Long leases: this test is about concurrent claims, not stalls.
  a.heartbeat_interval_s = b.heartbeat_interval_s = 30;
  a.extra_args = b.extra_args = {"--log-level", "warn"};
  CoordinatorProcess ca(dir.path(), a), cb(dir.path(), b);
  std::string error;
  REQUIRE(ca.Start(&error));
  REQUIRE(cb.Start(&error));

  auto dev = CreateKey(ca, "developer", &error);
  auto enroll = CreateKey(cb, "enroll", &error);
  INFO(error);
  REQUIRE(dev);
  REQUIRE(enroll);
  std::vector<NodeCredentials> nodes;
  for (int i = 0; i < kClaimers; ++i) {
    auto n = RegisterNode(i % 2 ? cb : ca, *enroll, "race-" + std::to_string(i), 24000, &error);
    INFO(error);
    REQUIRE(n);
    nodes.push_back(*n);
  }
  // Submit the jobs from 4 threads, alternating coordinators.
  auto submit_start = std::chrono::steady_clock::now();
  {
    std::atomic<int> failures{0};
    std::vector<std::thread> submitters;
    for (int t = 0; t < 4; ++t) {
      submitters.emplace_back([&, t] {
        HttpClient c((t % 2 ? cb : ca).url());
        c.set_token(*dev);
        for (int i = t; i < kJobs; i += 4) {
          std::string err;
          if (!SubmitSyntheticJob(c, 10, 5, &err)) failures++;
        }
      });
    }
    for (auto& t : submitters) t.join();
    REQUIRE(failures == 0);
  }
  WARN("submitted "
       << kJobs << " jobs in "
       << std::chrono::duration<double>(std::chrono::steady_clock::now() - submit_start).count()
       << " s");

  Shared shared;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  std::vector<std::string> urls = {ca.url(), cb.url()};
  std::vector<std::thread> claimers;
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kClaimers; ++i) {
    claimers.emplace_back(Claimer, i, std::cref(urls), std::cref(nodes[size_t(i)]), &shared,
                          deadline);
  }
  for (auto& t : claimers) t.join();
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  WARN("race: " << kJobs << " jobs, " << shared.held.size() << " leases, " << shared.released
                << " releases in " << secs << " s");

  INFO([&] {
    std::string all;
    for (const auto& v : shared.violations) all += v + "\n";
    return all;
  }());
  CHECK(shared.violations.empty());
  CHECK(shared.server_errors == 0);
  CHECK(shared.completed == kJobs);

  // The database agrees: one segment per handed-out lease, ending before the next begins.
  auto db = native::SqliteExecutor::Open({dir.File("db.sqlite")});
  REQUIRE(db.ok());
  core::Batch q;
  q.Add("SELECT COUNT(*) FROM jobs WHERE state = 'completed'");
  q.Add("SELECT COUNT(*) FROM segments");
  // A lease must be closed before the next one of its job opens. Timestamps are taken when a
  // request arrives, before its batch waits for the write lock, so a claim that queued behind
  // the release it follows may carry an earlier time: allow that much skew, no more.
  q.Add(
      "SELECT COUNT(*) FROM segments a JOIN segments b ON a.job_id = b.job_id AND "
      "b.epoch = a.epoch + 1 WHERE a.ended_at IS NULL OR a.ended_at > b.started_at + 5000");
  q.Add(
      "SELECT COUNT(*) FROM (SELECT job_id FROM segments WHERE end_reason = 'completed' "
      "GROUP BY job_id HAVING COUNT(*) <> 1)");
  q.Add(
      "SELECT COUNT(*) FROM jobs j WHERE lease_epoch <> (SELECT COUNT(*) FROM segments s "
      "WHERE s.job_id = j.id)");
  q.Add(
      "SELECT a.job_id, a.epoch, a.ended_at, b.started_at, a.end_reason FROM segments a JOIN "
      "segments b ON a.job_id = b.job_id AND b.epoch = a.epoch + 1 WHERE a.ended_at IS NULL OR "
      "a.ended_at > b.started_at + 5000 LIMIT 10");
  auto r = (*db)->Execute(q);
  REQUIRE(r.status.ok());
  std::string overlaps;
  for (const auto& row : r.results[5].rows) {
    overlaps += row[0].AsText() + " e" + std::to_string(row[1].AsInt()) + " ended " +
                std::to_string(row[2].AsInt()) + " next started " + std::to_string(row[3].AsInt()) +
                " " + row[4].AsText() + "\n";
  }
  INFO(overlaps);
  CHECK(r.results[0].rows[0][0].AsInt() == kJobs);
  CHECK(r.results[1].rows[0][0].AsInt() == int64_t(shared.held.size()));
  CHECK(r.results[2].rows[0][0].AsInt() == 0);  // overlapping leases of one job
  CHECK(r.results[3].rows[0][0].AsInt() == 0);  // a job completed by more than one lease
  CHECK(r.results[4].rows[0][0].AsInt() == 0);  // an epoch without its segment

  // Both processes survived the load and stop cleanly.
  CHECK(ca.process().Stop().clean());
  CHECK(cb.process().Stop().clean());
}
