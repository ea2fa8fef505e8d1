// Verified training end to end (docs/architecture.md "Verified training"): a real coordinator,
// honest and dishonest nodes (replay_node.h, test-only forgeries) and jobs with
// verify_fraction = 1. Every forged checkpoint must be caught (found bad by two other nodes, or
// discarded with the bad one it was built on), every dishonest node quarantined, no honest one,
// and each job must still complete with the honest result.
#include <catch2/catch.hpp>
#include <map>
#include <set>

#include "shared/sha256.h"
#include "tests/integration/coordinator_fixture.h"
#include "tests/integration/harness.h"
#include "tests/integration/replay_node.h"

using namespace gleaner;
using namespace gleaner::testing;

namespace {

constexpr int64_t kSteps = 40;
constexpr int64_t kEvery = 10;

struct Fleet {
  TempDir dir{"gleaner-verify"};
  std::unique_ptr<CoordinatorProcess> coord;
  HttpClient dev{""};
  std::vector<ReplayNode> nodes;

  explicit Fleet(const std::vector<Forgery>& forgeries) {
    CoordinatorOptions o;
    o.stall_after_s = 60;  // one test thread drives every node: no lease may stall meanwhile
    coord = std::make_unique<CoordinatorProcess>(dir.path(), o);
    std::string error;
    REQUIRE(coord->Start(&error));
    auto dev_token = CreateKey(*coord, "developer", &error);
    REQUIRE(dev_token);
    dev = coord->Client(*dev_token);
    auto enroll = CreateKey(*coord, "enroll", &error);
    REQUIRE(enroll);
    for (size_t i = 0; i < forgeries.size(); ++i) {
      auto cred = RegisterNode(*coord, *enroll, "machine-" + std::to_string(i), 8192, &error);
      REQUIRE(cred);
      nodes.emplace_back(cred->id, coord->Client(cred->token), forgeries[i], kEvery);
    }
  }

  std::string Submit(double fraction) {
    std::string error;
    auto id = SubmitSyntheticJob(dev, kSteps, kEvery, &error, {{"verify_fraction", fraction}});
    REQUIRE(id);
    return *id;
  }

  Json Events(const std::string& job) {
    HttpResult r = dev.Get("/v1/jobs/" + job + "/events");
    REQUIRE(r.status == 200);
    return r.json();
  }

  // Every node acts in turn until `done` holds (or a bound on rounds passes).
  void RunUntil(const std::function<bool()>& done, int max_rounds = 400) {
    for (int round = 0; round < max_rounds && !done(); ++round) {
      for (ReplayNode& n : nodes) {
        std::string error;
        INFO(error);
        REQUIRE(n.Step(&error));
      }
    }
    REQUIRE(done());
  }

  bool Settled(const std::vector<std::string>& jobs) {
    for (const std::string& j : jobs) {
      Json e = Events(j);
      if (e["job"]["state"] != "completed" || e["job"]["verification"]["open"] != 0) return false;
    }
    return true;
  }

  std::map<std::string, std::string> NodeStates() { return gleaner::testing::NodeStates(*coord); }
};

// The job's output is the honest one, and its lineage holds only honest checkpoints.
void CheckHonestResult(Fleet& f, const std::string& job) {
  Json e = f.Events(job);
  REQUIRE(e["job"]["state"] == "completed");
  REQUIRE(e["job"]["outputs"].size() == 1);
  CHECK(e["job"]["outputs"][0]["sha256"] == Sha256Hex(ReplayNode::HonestOutput(job, kSteps)));
  for (const Json& c : e["checkpoints"]) {
    CHECK(c["sha256"] == Sha256Hex(ReplayNode::HonestCheckpoint(job, c["step"])));
  }
}

}  // namespace

TEST_CASE("verification: with f = 1 every forgery is caught and jobs complete honestly",
          "[verification]") {
  Fleet f({Forgery::kPerturb, Forgery::kOtherJob, Forgery::kSkipSteps, Forgery::kForgeOutput,
           Forgery::kNone, Forgery::kNone, Forgery::kNone});
  const std::vector<std::string> jobs = {f.Submit(1), f.Submit(1), f.Submit(1)};
  f.RunUntil([&] { return f.Settled(jobs); });

  for (const std::string& j : jobs) CheckHonestResult(f, j);

  // Every forged checkpoint the coordinator accepted from a dishonest trainer was judged bad
  // (trainer_bad; no_majority when the first verifier forged too) or its replay was voided
  // because an earlier checkpoint of its lineage was found bad.
  std::map<std::pair<std::string, int64_t>, std::vector<Json>> by_segment;
  for (const std::string& j : jobs) {
    const Json events = f.Events(j);
    for (const Json& v : events["verifications"]) {
      by_segment[{j, v["step"].get<int64_t>()}].push_back(v);
    }
  }
  int forged = 0, forged_caught = 0;
  for (const ReplayNode& n : f.nodes) {
    for (const Upload& u : n.uploads()) {
      if (u.verification || !u.forged) continue;
      ++forged;
      bool caught = false;
      for (const Json& v : by_segment[{u.job, u.step}]) {
        if (v["claimed_sha256"] != u.sha256) continue;
        // An output forger's checkpoint is honest: its replay is the one of its outputs.
        if (n.forgery() == Forgery::kForgeOutput && v["claimed_outputs"] != u.outputs) {
          continue;
        }
        caught = caught || v["verdict"] == "trainer_bad" || v["verdict"] == "no_majority" ||
                 v["state"] == "void";
      }
      forged_caught += caught;
      INFO(n.id() << " forged step " << u.step << " of " << u.job);
      CHECK(caught);
    }
  }
  CHECK(forged > 0);
  CHECK(forged_caught == forged);

  // The dishonest nodes are quarantined, the honest ones are not (no false positive).
  std::map<std::string, std::string> states = f.NodeStates();
  int honest_verifications = 0;
  for (const ReplayNode& n : f.nodes) {
    INFO(n.id());
    if (n.forgery() == Forgery::kNone) {
      CHECK(states[n.id()] == "active");
      honest_verifications += int(n.verifications_done());
    } else {
      bool forged_any = false;
      for (const Upload& u : n.uploads()) forged_any = forged_any || u.forged;
      if (forged_any) CHECK(states[n.id()] == "quarantined");
    }
  }
  CHECK(honest_verifications > 0);
}

TEST_CASE("verification: an honest fleet has no false positive and f = 0 opens no replay",
          "[verification]") {
  Fleet f({Forgery::kNone, Forgery::kNone, Forgery::kNone});
  const std::string checked = f.Submit(1), unchecked = f.Submit(0);
  f.RunUntil([&] { return f.Settled({checked, unchecked}); });
  CheckHonestResult(f, checked);
  CheckHonestResult(f, unchecked);
  Json e = f.Events(checked);
  // Every segment replayed once and agreed on; verification is billed apart from training.
  CHECK(e["job"]["verification"]["verified"] == kSteps / kEvery);
  CHECK(e["job"]["verification"]["rejected"] == 0);
  for (const Json& v : e["verifications"]) {
    CHECK(v["verdict"] == "agree");
    CHECK(v["node_id"] != v["trainer_node"]);
  }
  CHECK(f.Events(unchecked)["verifications"].empty());
  // The cost report bills the replays apart, to the job they checked.
  HttpResult report = f.coord->OperatorClient().Get("/v1/reports/cost?group_by=job");
  REQUIRE(report.status == 200);
  const Json groups = report.json()["groups"];
  for (const Json& g : groups) {
    INFO(DumpJson(g));
    if (g["key"] == checked) CHECK(g["verification_seconds"].get<double>() > 0);
    if (g["key"] == unchecked) CHECK(g["verification_seconds"].get<double>() == 0);
  }
  for (const auto& [id, state] : f.NodeStates()) CHECK(state == "active");
}
