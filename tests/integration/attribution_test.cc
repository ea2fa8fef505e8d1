// Failure attribution with real agents (docs/operations.md "Failure attribution"): jobs that
// fail on purpose are the developer's input errors. On a 3-node fleet (three machines) each is
// reported by one node, confirmed by a node of another machine and then fails with the
// trainer's message after exactly two attempts; no node is banned or quarantined, and the fleet
// then completes a normal job.
#include <catch2/catch.hpp>

#include "tests/integration/agent_fleet.h"

using namespace gleaner;
using namespace gleaner::testing;

TEST_CASE("10 jobs failing on purpose on 3 machines: each fails after two attempts, no node "
          "banned or quarantined, a normal job then completes",
          "[agent][e2e][attribution]") {
  TempDir dir("gleaner-attribution");
  // One counted failure would quarantine a node: any failure wrongly held against one shows.
  Fleet fleet(dir.path(), 0.2, {"--quarantine-failures", "1"});
  REQUIRE(fleet.ok());
  std::vector<std::string> bad;
  for (int i = 0; i < 10; ++i) {
    Json params = {{"seed", 100 + i},
                   {"steps", 20},
                   {"step_ms", 2},
                   {"checkpoint_every", 5},
                   {"fail_at_step", 1 + i % 4}};
    std::string id = fleet.Submit(params, /*max_failures=*/100);
    REQUIRE(!id.empty());
    bad.push_back(id);
  }
  std::string error;
  std::vector<AgentProcess*> agents;
  for (const char* name : {"a", "b", "c"}) {
    agents.push_back(&fleet.AddAgent(name));  // machine-<name>: three machines
    REQUIRE(agents.back()->Start(&error));
  }
  INFO(agents[0]->Log());
  REQUIRE(fleet.WaitAllFinal(bad, Millis(90000)));
  for (size_t i = 0; i < bad.size(); ++i) {
    Json job = fleet.Job(bad[i]);
    INFO(DumpJson(job));
    CHECK(job["state"] == "failed");
    CHECK(job["attempts"] == 2);
    CHECK(job["failures"] == 0);
    const std::string reason = job.value("reason", "");
    CHECK(reason.find("fail_at_step " + std::to_string(1 + i % 4) + " reached") !=
          std::string::npos);
    Json ev = fleet.Events(bad[i]);
    INFO(DumpJson(ev));
    CHECK(ev["failures"].empty());  // no job_bans row
    REQUIRE(ev["input_errors"].size() == 2);
    CHECK(ev["input_errors"][0]["outcome"] == "confirmed");
    CHECK(ev["input_errors"][1]["outcome"] == "confirmed");
    CHECK(ev["input_errors"][0]["node_id"] != ev["input_errors"][1]["node_id"]);
  }
  HttpClient op = fleet.coordinator().OperatorClient();
  Json nodes = op.Get("/v1/nodes").json()["nodes"];
  INFO(DumpJson(nodes));
  REQUIRE(nodes.size() == 3);
  for (const Json& n : nodes) {
    CHECK(n["state"] == "active");
    CHECK(n["jobs_failed"] == 0);
  }
  // The fleet still works.
  std::string good =
      fleet.Submit({{"seed", 7}, {"steps", 20}, {"step_ms", 2}, {"checkpoint_every", 5}});
  REQUIRE(!good.empty());
  REQUIRE(fleet.WaitAllFinal({good}, Millis(60000)));
  CHECK(fleet.Job(good)["state"] == "completed");
  CHECK(fleet.ResultChain(good) == ExpectedChain(7, 20) + "\n");
  for (AgentProcess* a : agents) CHECK(a->process().Running());
}
