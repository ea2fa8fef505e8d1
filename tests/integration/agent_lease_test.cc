// End-to-end lease rules as the agent sees them: cancel, a zombie agent, a second signal.
#include <signal.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>

#include "tests/integration/agent_fleet.h"

using namespace gleaner;
using namespace gleaner::testing;

TEST_CASE("cancel: the agent stops the trainer, reports nothing, and takes the next job",
          "[agent][e2e]") {
  TempDir dir("gleaner-e2e-cancel");
  Fleet fleet(dir.path());
  REQUIRE(fleet.ok());
  std::string doomed = fleet.Submit({{"seed", 1}, {"steps", 100000}, {"step_ms", 10}});
  REQUIRE(!doomed.empty());
  AgentProcess& a = fleet.AddAgent("a");
  std::string error;
  REQUIRE(a.Start(&error));
  REQUIRE(WaitUntil([&] { return fleet.Job(doomed).value("step", 0) >= 5; }, Millis(20000),
                    Millis(20)));
  std::string next = fleet.Submit({{"seed", 2}, {"steps", 20}, {"step_ms", 5}});
  REQUIRE(fleet.coordinator()
              .OperatorClient()
              .Post("/v1/jobs/" + doomed + "/cancel", Json::object())
              .status == 200);
  INFO(a.Log());
  REQUIRE(fleet.WaitAllFinal({next}, Millis(20000)));
  CHECK(fleet.ResultChain(next) == ExpectedChain(2, 20) + "\n");
  CHECK(fleet.Job(doomed).value("state", "") == "canceled");
  CHECK(a.Log().find("canceled by the coordinator") != std::string::npos);
  CHECK(fleet.Events(doomed)["failures"].empty());
  // Idle again: SIGTERM exits 0 promptly.
  ExitStatus st = a.process().Stop(Millis(3000));
  CHECK(st.clean());
}

TEST_CASE("a zombie agent (stopped past the stall timeout) loses its lease and discards its work",
          "[agent][e2e]") {
  TempDir dir("gleaner-e2e-zombie");
  Fleet fleet(dir.path(), 0.2, {"--stall-after", "0.6"});
  REQUIRE(fleet.ok());
  std::string id =
      fleet.Submit({{"seed", 9}, {"steps", 120}, {"step_ms", 20}, {"checkpoint_every", 10}});
  REQUIRE(!id.empty());
  AgentProcess& z = fleet.AddAgent("zombie");
  std::string error;
  REQUIRE(z.Start(&error));
  REQUIRE(
      WaitUntil([&] { return fleet.Job(id).value("step", 0) >= 15; }, Millis(20000), Millis(20)));
  z.process().Signal(SIGSTOP);  // the agent freezes; its lease expires
  AgentProcess& h = fleet.AddAgent("healthy");
  REQUIRE(h.Start(&error));
  REQUIRE(WaitUntil([&] { return fleet.Job(id).value("lease_epoch", 0) >= 2; }, Millis(20000),
                    Millis(20)));
  z.process().Signal(SIGCONT);
  INFO(z.Log());
  REQUIRE(WaitUntil([&] { return z.Log().find("lease lost") != std::string::npos; }, Millis(10000),
                    Millis(20)));
  REQUIRE(fleet.WaitAllFinal({id}, Millis(30000)));
  CHECK(fleet.Job(id).value("state", "") == "completed");
  CHECK(fleet.ResultChain(id) == ExpectedChain(9, 120) + "\n");
  CHECK(z.Log().find("job " + id + ": completed") == std::string::npos);
  CHECK(z.process().Running());  // the zombie carries on asking for work
}

TEST_CASE("a second signal makes the agent exit at once", "[agent][e2e]") {
  TempDir dir("gleaner-e2e-signals");
  Fleet fleet(dir.path());
  REQUIRE(fleet.ok());
  // A trainer that ignores SIGTERM, so the first signal cannot finish the hand-back quickly.
  std::string trainer = dir.File("stubborn-trainer");
  REQUIRE(WriteFile(trainer, "#!/bin/sh\ntrap '' TERM INT\necho up > " + dir.File("started") +
                                 "\nexec sleep 60\n"));
  REQUIRE(::chmod(trainer.c_str(), 0755) == 0);
  std::string id = fleet.Submit({{"seed", 3}, {"steps", 10}});
  AgentProcess& a = fleet.AddAgent("a", {}, {"--trainer", trainer});
  std::string error;
  REQUIRE(a.Start(&error));
  REQUIRE(WaitUntil([&] { return fleet.Job(id).value("state", "") == "running"; }, Millis(20000),
                    Millis(20)));
  REQUIRE(WaitUntil([&] { return !ReadFile(dir.File("started")).empty(); }, Millis(5000)));
  a.process().Signal(SIGTERM);
  REQUIRE(WaitUntil(
      [&] { return a.Log().find("asking the trainer to checkpoint") != std::string::npos; },
      Millis(5000)));
  a.process().Signal(SIGINT);
  auto st = a.process().Wait(Millis(3000));
  INFO(a.Log());
  REQUIRE(st.has_value());
  CHECK(st->exited);
  CHECK(st->code == 130);
}
