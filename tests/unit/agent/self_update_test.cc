// The self-updater's wiring with a fake coordinator: key files, flags, when it checks, and that
// a refused release is not downloaded again. (Install, switch and rollback: updater_test.cc;
// the real processes: tests/integration/self_update_test.cc.)
#include "agent/supervisor/self_update.h"

#include <catch2/catch.hpp>
#include <ctime>

#include "fake_http.h"
#include "shared/native/files.h"
#include "shared/native/release_sign.h"
#include "shared/sha256.h"
#include "test_util.h"

using namespace gleaner;
using namespace gleaner::agent;
using gleaner::testing::FakeHttp;
using gleaner::testing::Reply;

TEST_CASE("self-update flags", "[self_update]") {
  auto c = testing::ParseAgentArgs({"--coordinator", "http://x:1", "--state-dir", "/s",
                                    "--release-keys", "/k", "--release-channel", "beta",
                                    "--update-interval", "60", "--self-test"});
  REQUIRE(c.ok());
  CHECK(c->release_keys == "/k");
  CHECK(c->release_channel == "beta");
  CHECK(c->update_interval_s == 60);
  CHECK(c->self_test);
  auto d = testing::ParseAgentArgs({"--coordinator", "http://x:1", "--state-dir", "/s"});
  REQUIRE(d.ok());
  CHECK(d->release_channel == "stable");
  CHECK(d->update_interval_s == 3600);
  CHECK_FALSE(d->self_test);
  CHECK(testing::ParseAgentArgs(
            {"--coordinator", "http://x:1", "--state-dir", "/s", "--release-channel", "Bad!"})
            .status()
            .code() == Code::kInvalidArgument);
}

TEST_CASE("self-update: release key files are checked at start", "[self_update]") {
  testing::TempDir t;
  FakeHttp http([](const net::HttpCall&) { return Reply(500); });
  AgentConfig config;
  config.coordinator = "http://coord.test";
  config.state_dir = t / "state";
  config.version = "1.0.0";
  config.release_keys = t / "missing.pub";
  CHECK(SelfUpdate::Create(config, {}, &http).status().code() == Code::kInvalidArgument);
  REQUIRE(files::WriteDurable(t / "bad.pub", "not a key\n").ok());
  config.release_keys = t / "bad.pub";
  CHECK(SelfUpdate::Create(config, {}, &http).status().code() == Code::kInvalidArgument);
  // No keys at all: updates are off and the coordinator is never asked.
  config.release_keys = "";
  Result<std::unique_ptr<SelfUpdate>> off = SelfUpdate::Create(config, {}, &http);
  REQUIRE(off.ok());
  CoordinatorApi api(&http, config.coordinator);
  (*off)->BetweenJobs(&api, true);
  CHECK(http.calls().empty());
}

TEST_CASE("self-update: checks after jobs and on its interval, and fetches a refused release once",
          "[self_update]") {
  testing::TempDir t;
  release::KeyPair key = release::GenerateKeyPair().value();
  REQUIRE(files::WriteDurable(t / "release.pub", key.public_hex + "\n").ok());
  std::string bytes = "new agent";
  std::string manifest = R"({"version":"2.0.0","channel":"stable","expires":)" +
                         std::to_string(int64_t(std::time(nullptr)) + 3600) + R"(,"artifacts":{")" +
                         ReleasePlatform() +
                         R"(":{"uri":"http://dl.test/agent","length":9,"sha256":")" +
                         std::string(64, 'a') + R"("}}})";
  std::string envelope =
      release::EnvelopeToJson(release::SignManifest(key.private_pem, manifest).value());
  int downloads = 0;
  FakeHttp http([&](const net::HttpCall& call) -> Result<net::HttpResponse> {
    if (call.url.find("/v1/agent/release?platform=") != std::string::npos) {
      return Reply(200, R"({"version":"2.0.0","channel":"stable","release":)" + envelope + "}");
    }
    ++downloads;
    if (call.sink) call.sink(bytes);
    return Reply(200, "");
  });
  AgentConfig config;
  config.coordinator = "http://coord.test";
  config.state_dir = t / "state";
  config.version = "1.0.0";
  config.release_keys = t / "release.pub";
  Result<std::unique_ptr<SelfUpdate>> u = SelfUpdate::Create(config, {}, &http);
  REQUIRE(u.ok());
  CoordinatorApi api(&http, config.coordinator);
  (*u)->BetweenJobs(&api, false);   // at start: checks
  CHECK(http.calls().size() == 2);  // the release, then its download (wrong sha256: refused)
  CHECK(downloads == 1);
  (*u)->BetweenJobs(&api, false);  // idle, interval not over: nothing
  CHECK(http.calls().size() == 2);
  (*u)->BetweenJobs(&api, true);  // after a job: asks again, but does not download it again
  CHECK(http.calls().size() == 3);
  CHECK(downloads == 1);
  CHECK_FALSE(files::Exists(t / "state/versions/2.0.0"));
}
