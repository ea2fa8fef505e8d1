// The coordinator is stateless: killed with SIGKILL and restarted between any two steps of a
// job's life, it loses nothing (jobs, leases, checkpoints, segments, blobs).
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <functional>

#include "coordinator/native/db/sqlite_executor.h"
#include "shared/sha256.h"
#include "tests/integration/coordinator_fixture.h"
#include "tests/integration/harness.h"
#include "tests/integration/store_check.h"

using namespace gleaner;
using namespace gleaner::testing;

namespace {

// Every row of every state table (scaling_events is appended by maintenance ticks and left out).
std::string DbSnapshot(const std::string& path) {
  auto db = native::SqliteExecutor::Open({path});
  REQUIRE(db.ok());
  std::string out;
  for (const char* t : {"api_keys", "nodes", "jobs", "job_bans", "segments", "checkpoints", "blobs",
                        "uploads", "prices"}) {
    core::Batch b;
    b.Add(std::string("SELECT * FROM ") + t + " ORDER BY 1, 2");
    auto r = (*db)->Execute(b);
    INFO(r.status.ToString());
    REQUIRE(r.status.ok());
    out += std::string("# ") + t + "\n";
    for (const auto& row : r.results[0].rows) {
      for (const auto& v : row) {
        out += v.is_null()                               ? "NULL"
               : v.type() == core::SqlValue::Type::kText ? v.AsText()
                                                         : std::to_string(v.AsReal());
        out += "|";
      }
      out += "\n";
    }
  }
  return out;
}

// Relative path and size of every stored object.
std::string ListBlobs(const std::string& data_dir) {
  std::string out;
  for (const std::string& key : ListObjects(data_dir)) {
    struct stat st;
    if (::stat((data_dir + "/blobs/" + key).c_str(), &st) == 0) {
      out += key + " " + std::to_string(st.st_size) + "\n";
    }
  }
  return out;
}

}  // namespace

TEST_CASE("SIGKILL and restart between steps loses nothing", "[coordinator][restart]") {
  TempDir dir;
  CoordinatorOptions o;
  o.heartbeat_interval_s = 30;  // no lease may expire during the test
  CoordinatorProcess coord(dir.path(), o);
  std::string error;
  REQUIRE(coord.Start(&error));

  // After each step: remember everything, kill -9, restart, and compare.
  int restarts = 0;
  auto kill_and_restart = [&](const std::string& step) {
    INFO("after step: " << step);
    std::string before = DbSnapshot(dir.File("db.sqlite"));
    std::string blobs_before = ListBlobs(dir.File("data"));
    coord.process().Kill();
    REQUIRE(coord.Start(&error));
    ++restarts;
    CHECK(DbSnapshot(dir.File("db.sqlite")) == before);
    CHECK(ListBlobs(dir.File("data")) == blobs_before);
  };

  auto dev_token = CreateKey(coord, "developer", &error);
  auto enroll = CreateKey(coord, "enroll", &error);
  REQUIRE(dev_token);
  REQUIRE(enroll);
  auto n1 = RegisterNode(coord, *enroll, "restart-1", 24000, &error);
  auto n2 = RegisterNode(coord, *enroll, "restart-2", 24000, &error);
  REQUIRE(n1);
  REQUIRE(n2);
  std::vector<std::string> jobs;
  {
    HttpClient dev = coord.Client(*dev_token);
    for (int i = 0; i < 3; ++i) {
      auto j = SubmitSyntheticJob(dev, 20, 5, &error, {{"priority", 10 - i}});
      INFO(error);
      REQUIRE(j);
      jobs.push_back(*j);
    }
  }
  kill_and_restart("submit");
  const std::string base = "/v1/jobs/" + jobs[0];

  // n1 claims the first job.
  HttpResult work = coord.Client(n1->token).Post("/v1/work", Json::object());
  INFO(work.Describe());
  REQUIRE(work.status == 200);
  REQUIRE(work.json()["job"]["id"] == jobs[0]);
  int64_t epoch = work.json()["lease"]["epoch"].get<int64_t>();
  kill_and_restart("claim");

  // The lease survived: the holder's heartbeat is accepted, another node's is not.
  HttpResult hb =
      coord.Client(n1->token).Post(base + "/heartbeat", {{"epoch", epoch}, {"step", 5}});
  INFO(hb.Describe());
  CHECK(hb.status == 200);
  CHECK(coord.Client(n2->token).Post(base + "/heartbeat", {{"epoch", epoch}, {"step", 5}}).status ==
        409);
  kill_and_restart("heartbeat");

  // A checkpoint at step 5: URL, PUT, commit, each followed by a restart.
  HttpResult url =
      coord.Client(n1->token).Post(base + "/checkpoints", {{"epoch", epoch}, {"step", 5}});
  INFO(url.Describe());
  REQUIRE(url.status == 200);
  std::string put_url = url.json()["url"].get<std::string>();
  kill_and_restart("checkpoint url");
  std::string ckpt = "checkpoint bytes at step 5";
  // The URL was minted for the old port: the same path and query on the new one.
  std::string path_query = put_url.substr(put_url.find("/blobs/"));
  HttpResult put = HttpClient::Fetch("PUT", coord.url() + path_query, ckpt);
  INFO(put.Describe());
  REQUIRE(put.status / 100 == 2);
  kill_and_restart("checkpoint put");
  HttpResult commit = coord.Client(n1->token).Post(
      base + "/checkpoints/5/commit",
      {{"epoch", epoch}, {"sha256", Sha256Hex(ckpt)}, {"size", int64_t(ckpt.size())}});
  INFO(commit.Describe());
  REQUIRE(commit.status == 200);
  kill_and_restart("checkpoint commit");
  HttpResult job = coord.Client(*dev_token).Get(base);
  INFO(job.Describe());
  REQUIRE(job.status == 200);
  CHECK(job.json()["latest_checkpoint"]["step"] == 5);
  CHECK(job.json()["state"] == "running");

  // n1 is interrupted and releases; n2 resumes from the committed checkpoint.
  REQUIRE(coord.Client(n1->token).Post(base + "/release", {{"epoch", epoch}}).status == 200);
  kill_and_restart("release");
  work = coord.Client(n2->token).Post("/v1/work", Json::object());
  INFO(work.Describe());
  REQUIRE(work.status == 200);
  REQUIRE(work.json()["job"]["id"] == jobs[0]);
  int64_t epoch2 = work.json()["lease"]["epoch"].get<int64_t>();
  CHECK(epoch2 == epoch + 1);
  Json resume = work.json()["resume"];
  CHECK(resume["step"] == 5);
  CHECK(resume["sha256"] == Sha256Hex(ckpt));
  kill_and_restart("second claim");
  std::string resume_url = resume["url"].get<std::string>();
  HttpResult got =
      HttpClient::Fetch("GET", coord.url() + resume_url.substr(resume_url.find("/blobs/")));
  CHECK(got.status == 200);
  CHECK(got.body == ckpt);
  // The old holder is fenced off for good.
  CHECK(coord.Client(n1->token).Post(base + "/heartbeat", {{"epoch", epoch}, {"step", 6}}).status ==
        409);

  // n2 finishes: the last step, output URL, PUT, complete.
  REQUIRE(
      coord.Client(n2->token).Post(base + "/heartbeat", {{"epoch", epoch2}, {"step", 20}}).status ==
      200);
  HttpResult out =
      coord.Client(n2->token).Post(base + "/outputs", {{"epoch", epoch2}, {"name", "chain.txt"}});
  REQUIRE(out.status == 200);
  std::string out_url = out.json()["url"].get<std::string>();
  std::string chain = "chain\n";
  REQUIRE(HttpClient::Fetch("PUT", coord.url() + out_url.substr(out_url.find("/blobs/")), chain)
                  .status /
              100 ==
          2);
  kill_and_restart("output put");
  HttpResult done = coord.Client(n2->token).Post(
      base + "/complete", {{"epoch", epoch2},
                           {"outputs", Json::array({{{"name", "chain.txt"},
                                                     {"sha256", Sha256Hex(chain)},
                                                     {"size", int64_t(chain.size())}}})}});
  INFO(done.Describe());
  REQUIRE(done.status == 200);
  kill_and_restart("complete");

  job = coord.Client(*dev_token).Get(base);
  CHECK(job.json()["state"] == "completed");
  HttpResult events = coord.Client(*dev_token).Get(base + "/events");
  INFO(events.Describe());
  REQUIRE(events.status == 200);
  CHECK(events.json()["segments"].size() == 2);
  HttpResult result = coord.Client(*dev_token).Get(base + "/result");
  REQUIRE(result.status == 200);
  std::string result_url = result.json()["outputs"][0]["url"].get<std::string>();
  CHECK(HttpClient::Fetch("GET", result_url).body == chain);
  // The other jobs are untouched and still claimable, in priority order.
  work = coord.Client(n1->token).Post("/v1/work", Json::object());
  REQUIRE(work.status == 200);
  CHECK(work.json()["job"]["id"] == jobs[1]);
  CHECK(restarts == 10);
}
