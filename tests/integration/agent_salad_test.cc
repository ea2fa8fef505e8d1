// gleaner-agent as it runs on SaladCloud: SALAD_MACHINE_ID is its machine id, and it sets its
// instance deletion cost through a stand-in instance metadata service (GLEANER_IMDS_URL):
// 0 at start, high while it trains a job, 0 again once the job is done.
#include <httplib.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <mutex>
#include <thread>

#include "tests/integration/agent_fleet.h"

using namespace gleaner;
using namespace gleaner::testing;

namespace {

struct Put {
  std::string body;
  std::string job_state;  // the job's state on the coordinator when the PUT arrived
};

}  // namespace

TEST_CASE("on SaladCloud the agent uses SALAD_MACHINE_ID and is costly to delete while busy",
          "[agent][e2e]") {
  TempDir dir("gleaner-e2e-salad");
  Fleet fleet(dir.path());
  REQUIRE(fleet.ok());
  std::string job =
      fleet.Submit({{"seed", 5}, {"steps", 80}, {"step_ms", 25}, {"checkpoint_every", 20}});
  REQUIRE(!job.empty());

  std::mutex mu;
  std::vector<Put> puts;
  std::vector<std::string> bad;  // requests that are not what the IMDS accepts
  httplib::Server imds;
  imds.Put("/v1/deletion-cost", [&](const httplib::Request& req, httplib::Response& res) {
    std::string state = fleet.Job(job).value("state", "");
    std::lock_guard<std::mutex> lock(mu);
    if (req.get_header_value("Metadata") != "true" ||
        req.get_header_value("Content-Type") != "application/json") {
      bad.push_back(req.method + " " + req.path);
      res.status = 400;
      return;
    }
    puts.push_back({req.body, state});
    res.status = 204;
  });
  int port = imds.bind_to_any_port("127.0.0.1");
  std::thread server([&] { imds.listen_after_bind(); });
  while (!imds.is_running()) std::this_thread::yield();

  AgentProcess& agent =
      fleet.AddAgent("salad", {{"SALAD_MACHINE_ID", "salad-node-7"},
                               {"GLEANER_IMDS_URL", "http://127.0.0.1:" + std::to_string(port)}});
  // Drop the fixture's explicit machine id so the agent falls back to SALAD_MACHINE_ID.
  auto& env = agent.process().spec().env;
  env.erase(std::remove_if(env.begin(), env.end(),
                           [](const auto& kv) { return kv.first == "GLEANER_MACHINE_ID"; }),
            env.end());
  auto& unset = agent.process().spec().unset_env;
  unset.erase(std::remove(unset.begin(), unset.end(), "SALAD_MACHINE_ID"), unset.end());
  unset.push_back("GLEANER_MACHINE_ID");
  std::string error;
  REQUIRE(agent.Start(&error));

  INFO(agent.Log());
  REQUIRE(fleet.WaitAllFinal({job}, Millis(30000)));
  CHECK(fleet.Job(job).value("state", "") == "completed");
  // The job is done: the last deletion cost the agent set is 0 again.
  const std::string idle = R"({"deletion_cost":0})", busy = R"({"deletion_cost":1000})";
  auto busy_seen = [&] {
    for (const Put& p : puts) {
      if (p.body == busy) return true;
    }
    return false;
  };
  REQUIRE(WaitUntil(
      [&] {
        std::lock_guard<std::mutex> lock(mu);
        return busy_seen() && puts.back().body == idle;
      },
      Millis(10000)));
  imds.stop();
  server.join();

  std::lock_guard<std::mutex> lock(mu);
  CHECK(bad.empty());
  // Idle at start (unless the job was claimed before that PUT went out: the newest value wins),
  // busy while the job ran on this node, idle after it.
  REQUIRE(puts.size() >= 2);
  REQUIRE(puts.size() <= 3);
  if (puts.size() == 3) CHECK(puts[0].body == idle);
  const Put& b = puts[puts.size() - 2];
  CHECK(b.body == busy);
  CHECK(b.job_state == "running");
  CHECK(puts.back().body == idle);
  Json id = Json::parse(ReadFile(dir.File("salad/identity.json"), "{}"), nullptr, false);
  CHECK(id.value("machine_id", "") == "salad-node-7");
}
