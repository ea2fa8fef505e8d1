// gleaner-agent --self-test with the real gleaner-train (and a stand-in too old for replays)
// behind a fake coordinator that answers /healthz.
#include "agent/supervisor/self_test.h"

#include <catch2/catch.hpp>

#include "fake_http.h"
#include "shared/native/files.h"
#include "test_util.h"

using namespace gleaner;
using namespace gleaner::agent;
using gleaner::testing::FakeHttp;
using gleaner::testing::Reply;

TEST_CASE(
    "the self-test runs a job and its replay, and refuses a trainer without replays or without "
    "a last checkpoint that records the output",
    "[self_test]") {
  testing::TempDir t;
  FakeHttp http([](const net::HttpCall&) { return Reply(200, "{}"); });
  AgentConfig config;
  config.coordinator = "http://coord.test";
  config.state_dir = t / "state";
  REQUIRE(files::MakeDirs(config.state_dir, 0700).ok());
  config.trainer = testing::TrainBin();
  CHECK(RunSelfTest(config, &http) == 0);
  // A trainer that predates --stop-at-step (refuses it as a usage error, like any unknown flag).
  const std::string old_trainer = t / "old-trainer.sh";
  REQUIRE(files::WriteDurable(old_trainer,
                              "#!/bin/sh\nfor a in \"$@\"; do [ \"$a\" = --stop-at-step ] && "
                              "exit 64; done\nexec " +
                                  testing::TrainBin() + " \"$@\"\n",
                              0755)
              .ok());
  config.trainer = old_trainer;
  CHECK(RunSelfTest(config, &http) == 1);
  // A trainer that predates bound outputs: no checkpoint of the last step (its jobs could not
  // complete where they are verified).
  const std::string unbound = t / "unbound-trainer.sh";
  REQUIRE(files::WriteDurable(unbound,
                              "#!/bin/sh\n" + testing::TrainBin() +
                                  " \"$@\" || exit $?\nwhile [ $# -gt 0 ]; do [ \"$1\" = "
                                  "--work-dir ] && rm -rf \"$2/checkpoints/0000000003\"; shift; "
                                  "done\nexit 0\n",
                              0755)
              .ok());
  config.trainer = unbound;
  CHECK(RunSelfTest(config, &http) == 1);
}
