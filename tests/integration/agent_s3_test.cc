// End-to-end against a real S3-compatible server on loopback (s3rver from npm, installed by
// infra/deps.sh into tests/s3/node_modules): the coordinator presigns SigV4 URLs, agents upload
// checkpoints to S3 and a second agent resumes from them.
#include <signal.h>

#include <catch2/catch.hpp>

#include "tests/integration/agent_fleet.h"
#include "tests/skip.h"

using namespace gleaner;
using namespace gleaner::testing;

TEST_CASE("agents checkpoint to S3 (s3rver) and resume from it", "[agent][e2e][s3]") {
  std::string s3rver = std::string(GLEANER_SOURCE_DIR) + "/tests/s3/node_modules/.bin/s3rver";
  if (ReadFile(s3rver).empty()) {
    GLEANER_SKIP("s3rver is not installed (infra/deps.sh installs it into tests/s3)");
  }
  TempDir dir("gleaner-e2e-s3");
  ProcessSpec spec;
  spec.binary = s3rver;
  spec.args = {"-d", dir.File("s3"), "-a", "127.0.0.1", "-p", "0", "--configure-bucket", "gleaner"};
  spec.stdout_path = dir.File("s3rver.out");
  spec.stderr_path = dir.File("s3rver.err");
  Process server(spec);
  std::string error;
  REQUIRE(server.Start(&error));
  std::string port;
  REQUIRE(WaitUntil(
      [&] {
        std::string out = ReadFile(dir.File("s3rver.out"));
        size_t at = out.find("listening on 127.0.0.1:");
        if (at == std::string::npos) return false;
        size_t start = at + std::string("listening on 127.0.0.1:").size();
        size_t end = out.find_first_not_of("0123456789", start);
        if (end == std::string::npos) return false;
        port = out.substr(start, end - start);
        return !port.empty();
      },
      Millis(20000), Millis(20)));

  Fleet fleet(dir.path(), 0.2,
              {"--s3-endpoint", "http://127.0.0.1:" + port, "--s3-bucket", "gleaner", "--s3-region",
               "us-east-1"},
              {{"AWS_ACCESS_KEY_ID", "S3RVER"}, {"AWS_SECRET_ACCESS_KEY", "S3RVER"}});
  INFO(fleet.error());
  REQUIRE(fleet.ok());
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) {
    ids.push_back(
        fleet.Submit({{"seed", 77 + i}, {"steps", 60}, {"step_ms", 25}, {"checkpoint_every", 10}}));
    REQUIRE(!ids.back().empty());
  }
  AgentProcess& a = fleet.AddAgent("a");
  REQUIRE(a.Start(&error));
  REQUIRE(WaitUntil([&] { return !a.NodeId().empty(); }, Millis(10000)));
  std::string job;
  REQUIRE(WaitUntil([&] { return !(job = fleet.RunningJobOf(a.NodeId(), 15, 45)).empty(); },
                    Millis(20000), Millis(20)));
  a.process().Signal(SIGTERM);
  REQUIRE(a.process().Wait(Millis(10000)).has_value());
  AgentProcess& b = fleet.AddAgent("b");
  REQUIRE(b.Start(&error));
  INFO(b.Log());
  REQUIRE(fleet.WaitAllFinal(ids, Millis(60000)));
  for (int i = 0; i < 3; ++i) {
    CHECK(fleet.Job(ids[i]).value("state", "") == "completed");
    CHECK(fleet.ResultChain(ids[i]) == ExpectedChain(77 + i, 60) + "\n");
  }
  // b resumed a's job from the checkpoint a committed to S3.
  CHECK(b.Log().find("job " + job + ": resuming from checkpoint step") != std::string::npos);
  CHECK(!ReadFile(dir.File("s3/gleaner/jobs/" + job + "/out/e2/chain.txt._S3rver_object")).empty());
}
