#include "agent/supervisor/config.h"

#include <catch2/catch.hpp>
#include <cstdlib>

#include "shared/native/files.h"
#include "test_util.h"

using namespace gleaner;
using namespace gleaner::agent;

TEST_CASE("agent flags override env, which overrides the config file", "[config]") {
  testing::TempDir t;
  REQUIRE(files::WriteSynced(t / "agent.conf",
                             "# comment\ncoordinator = http://file:1\nstate-dir=/from/file\n"
                             "shutdown-deadline = 7\n")
              .ok());
  setenv("GLEANER_STATE_DIR", "/from/env", 1);
  auto c = testing::ParseAgentArgs(
      {"--config", t / "agent.conf", "--heartbeat-interval", "0.5", "--once"});
  unsetenv("GLEANER_STATE_DIR");
  REQUIRE(c.ok());
  CHECK(c->coordinator == "http://file:1");
  CHECK(c->state_dir == "/from/env");
  CHECK(c->shutdown_deadline_s == 7);
  CHECK(c->heartbeat_override_s == 0.5);
  CHECK(c->once);
  CHECK(c->trainer.find("gleaner-train") != std::string::npos);

  auto d = testing::ParseAgentArgs(
      {"--coordinator", "http://x:2", "--state-dir=/s", "--cache-max-mb", "100"});
  REQUIRE(d.ok());
  CHECK(d->cache_max_mb == 100);
  CHECK(d->shutdown_deadline_s == 20);
}

TEST_CASE("bad agent flags are one readable error", "[config]") {
  CHECK(testing::ParseAgentArgs({"--coordinator", "ftp://x", "--state-dir", "/s"})
            .status()
            .message()
            .find("http") != std::string::npos);
  CHECK(testing::ParseAgentArgs({"--state-dir", "/s"}).status().message().find("--coordinator") !=
        std::string::npos);
  CHECK(testing::ParseAgentArgs({"--bogus", "1"}).status().message().find("--bogus") !=
        std::string::npos);
  CHECK(testing::ParseAgentArgs(
            {"--coordinator", "http://x", "--state-dir", "/s", "--shutdown-deadline", "-1"})
            .status()
            .message()
            .find("--shutdown-deadline") != std::string::npos);
  CHECK(testing::ParseAgentArgs({"--coordinator"}).status().code() == Code::kInvalidArgument);
  CHECK(testing::ParseAgentArgs({"--help"}).status().code() == Code::kNotFound);
}

TEST_CASE("replays are off unless --verify or verify=true asks for them", "[config]") {
  testing::TempDir t;
  auto off = testing::ParseAgentArgs({"--coordinator", "http://x", "--state-dir", "/s"});
  REQUIRE(off.ok());
  CHECK_FALSE(off->verify);
  auto flag =
      testing::ParseAgentArgs({"--coordinator", "http://x", "--state-dir", "/s", "--verify"});
  REQUIRE(flag.ok());
  CHECK(flag->verify);
  REQUIRE(files::WriteSynced(t / "agent.conf", "coordinator=http://x\nstate-dir=/s\nverify=true\n")
              .ok());
  auto file = testing::ParseAgentArgs({"--config", t / "agent.conf"});
  REQUIRE(file.ok());
  CHECK(file->verify);
  auto overridden = testing::ParseAgentArgs({"--config", t / "agent.conf", "--verify=false"});
  REQUIRE(overridden.ok());
  CHECK_FALSE(overridden->verify);
  CHECK(testing::ParseAgentArgs({"--coordinator", "http://x", "--state-dir", "/s", "--verify=yes"})
            .status()
            .message()
            .find("verify") != std::string::npos);
}
