// Verified training with real gleaner-agent processes (docs/architecture.md "Verified
// training"): agents started with --verify replay other nodes' segments (gleaner-train
// --stop-at-step) and commit what they got. With verify_fraction = 1, honest agents agree with
// each other on every segment, and a forging trainer (replay_node.h, test only) is caught by
// them: quarantined, its checkpoints discarded, the job finished honestly by the agents.
#include <catch2/catch.hpp>
#include <map>

#include "tests/integration/agent_fleet.h"
#include "tests/integration/coordinator_fixture.h"
#include "tests/integration/harness.h"
#include "tests/integration/replay_node.h"

using namespace gleaner;
using namespace gleaner::testing;

namespace {

constexpr int64_t kSteps = 40;
constexpr int64_t kEvery = 10;
constexpr int64_t kSeed = 11;

const Json kParams = {
    {"steps", kSteps}, {"checkpoint_every", kEvery}, {"step_ms", 20}, {"seed", kSeed}};

// The job completed and no replay of it is open.
bool Settled(Fleet& f, const std::string& job) {
  Json j = f.Job(job);
  return j.value("state", "") == "completed" && j["verification"]["open"] == 0;
}

}  // namespace

TEST_CASE("agents with --verify replay each other's segments and agree on every one",
          "[verification][agent][e2e]") {
  TempDir dir("gleaner-agent-verify");
  Fleet f(dir.path(), 0.2, {"--verify-fraction", "1"});
  REQUIRE(f.ok());
  const std::string job = f.Submit(kParams);
  REQUIRE(!job.empty());
  std::string error;
  AgentProcess& a = f.AddAgent("a", {}, {"--verify"});
  AgentProcess& b = f.AddAgent("b", {}, {"--verify"});
  REQUIRE(a.Start(&error));
  REQUIRE(b.Start(&error));
  const bool settled = WaitUntil([&] { return Settled(f, job); }, Millis(60000), Millis(100));
  INFO(a.Log());
  INFO(b.Log());
  REQUIRE(settled);
  CHECK(f.ResultChain(job) == ExpectedChain(kSeed, kSteps) + "\n");
  const Json e = f.Events(job);
  // Every committed checkpoint was replayed by the other agent and agreed on.
  REQUIRE(e["verifications"].size() >= 1);
  CHECK(e["job"]["verification"]["verified"] == e["verifications"].size());
  CHECK(e["job"]["verification"]["rejected"] == 0);
  for (const Json& v : e["verifications"]) {
    INFO(DumpJson(v));
    CHECK(v["verdict"] == "agree");
    CHECK(v["node_id"] != v["trainer_node"]);
    CHECK(v["result_sha256"] == v["claimed_sha256"]);
    // The agents report their reproducibility class; the replay came from the same one.
    CHECK(v["trainer_class"]["device"] == "cpu");
    CHECK(v["trainer_class"]["gpu_model"] == "cpu");
    CHECK(v["trainer_class"]["trainer_build"].get<std::string>().size() == 16);
    CHECK(v["verifier_class"] == v["trainer_class"]);
  }
  for (const auto& [id, state] : NodeStates(f.coordinator())) CHECK(state == "active");
  CHECK((a.Log() + b.Log()).find("committed the checkpoint of step") != std::string::npos);
}

TEST_CASE("a forging trainer is caught by gleaner-agent verifiers and the job ends honestly",
          "[verification][agent][e2e]") {
  TempDir dir("gleaner-agent-verify-forger");
  // A long stall window: one test thread drives the forger between its other waits.
  Fleet f(dir.path(), 0.2, {"--verify-fraction", "1", "--stall-after", "10"});
  REQUIRE(f.ok());
  std::string error;
  // A CPU node like the agents below (without a GPU): replays are only compared on the device
  // the segment was trained on.
  auto cred =
      RegisterNode(f.coordinator(), f.enroll_token(), "machine-forger", 8192, &error, "cpu");
  REQUIRE(cred);
  ReplayNode forger(cred->id, f.coordinator().Client(cred->token), Forgery::kPerturb, kEvery);
  const std::string job = f.Submit(kParams);
  REQUIRE(!job.empty());
  // The forger claims the job and "trains" all of it before any agent exists.
  for (int i = 0; i < 20 && (forger.uploads().empty() || !forger.idle()); ++i) {
    INFO(error);
    REQUIRE(forger.Step(&error));
  }
  // Its last segment is always replayed: the job waits in 'verifying', its output withheld.
  REQUIRE(f.Job(job).value("state", "") == "verifying");
  REQUIRE(f.Job(job)["outputs"].empty());
  REQUIRE(forger.uploads().size() == size_t(kSteps / kEvery));

  AgentProcess& a = f.AddAgent("a", {}, {"--verify"});
  AgentProcess& b = f.AddAgent("b", {}, {"--verify"});
  REQUIRE(a.Start(&error));
  REQUIRE(b.Start(&error));
  // The forger keeps polling (it also asks for replays) until the job has settled.
  const bool settled = WaitUntil(
      [&] {
        REQUIRE(forger.Step(&error));
        return Settled(f, job) && forger.saw_quarantine();
      },
      Millis(90000), Millis(50));
  INFO(a.Log());
  INFO(b.Log());
  INFO(DumpJson(f.Events(job)));
  REQUIRE(settled);

  // The job was rewound and finished by the agents: the honest chain.
  CHECK(f.ResultChain(job) == ExpectedChain(kSeed, kSteps) + "\n");
  std::map<std::string, std::string> states = NodeStates(f.coordinator());
  CHECK(states[forger.id()] == "quarantined");
  CHECK(states[a.NodeId()] == "active");
  CHECK(states[b.NodeId()] == "active");
  // Nothing the forger trained was agreed on; a segment of it was found bad by both agents.
  const Json e = f.Events(job);
  int trainer_bad = 0;
  for (const Json& v : e["verifications"]) {
    INFO(DumpJson(v));
    if (v["trainer_node"] == forger.id()) {
      CHECK(v["verdict"] != "agree");
      trainer_bad += v["verdict"] == "trainer_bad";
    } else if (v["state"] == "done") {
      CHECK((v["verdict"] == "agree" || v["verdict"] == "verifier_bad"));
    }
  }
  CHECK(trainer_bad >= 1);
  CHECK(e["job"]["verification"]["rejected"].get<int64_t>() >= 1);
  for (const Json& c : e["checkpoints"]) {
    INFO(DumpJson(c));
    for (const Upload& u : forger.uploads()) CHECK(c["sha256"] != u.sha256);
  }
}
