// Signed self-update end to end: real coordinator, real agents, releases made with
// gleaner-release and published through POST /v1/agent/releases, binaries served over HTTP by a
// server in this test. The "new version" is gleaner-agent-next, a test build of the same sources
// whose compiled-in version is 999.0.0.
#include "agent/supervisor/self_update.h"

#include <httplib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <ctime>
#include <map>
#include <thread>

#include "agent/supervisor/config.h"
#include "shared/sha256.h"
#include "tests/integration/agent_fleet.h"

using namespace gleaner;
using namespace gleaner::testing;

namespace {

// Serves fixed byte strings by path, a path whose body never ends, and counts requests.
class ArtifactServer {
 public:
  ArtifactServer() {
    server_.Get(R"(/a/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
      auto it = files_.find(req.matches[1]);
      if (it == files_.end()) {
        res.status = 404;
        return;
      }
      res.set_content(it->second, "application/octet-stream");
    });
    server_.Get("/endless", [](const httplib::Request&, httplib::Response& res) {
      res.set_chunked_content_provider("application/octet-stream",
                                       [](size_t, httplib::DataSink& sink) {
                                         static const std::string chunk(1 << 16, 'x');
                                         return sink.write(chunk.data(), chunk.size());
                                       });
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~ArtifactServer() {
    server_.stop();
    thread_.join();
  }
  // Set before any agent downloads (the map is not locked).
  void Put(const std::string& name, const std::string& bytes) { files_[name] = bytes; }
  std::string Url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }

 private:
  httplib::Server server_;
  std::map<std::string, std::string> files_;
  int port_ = 0;
  std::thread thread_;
};

// Runs gleaner-release to completion; true on exit 0.
bool Release(const std::vector<std::string>& args, const std::string& dir) {
  ProcessSpec spec;
  spec.binary = "gleaner-release";
  spec.args = args;
  spec.stderr_path = dir + "/release.stderr";
  Process p(spec);
  std::string error;
  if (!p.Start(&error)) return false;
  std::optional<ExitStatus> st = p.Wait(Millis(20000));
  return st && st->clean();
}

struct Keys {
  std::string dir, priv, pub;
  Keys(const std::string& d, const std::string& name)
      : dir(d), priv(d + "/" + name + ".pem"), pub(d + "/" + name + ".pub") {
    REQUIRE(Release({"keygen", "--private", priv, "--public", pub}, d));
  }
  // Signed envelope JSON for one artifact.
  Json Sign(const std::string& version, const std::string& channel, const std::string& uri,
            int64_t length, const std::string& sha256, int64_t expires = 0) const {
    if (expires == 0) expires = int64_t(std::time(nullptr)) + 3600;
    Json m = {
        {"version", version},
        {"channel", channel},
        {"expires", expires},
        {"artifacts",
         {{agent::ReleasePlatform(), {{"uri", uri}, {"length", length}, {"sha256", sha256}}}}}};
    std::string mf = dir + "/manifest-" + channel + ".json";
    std::string out = dir + "/envelope-" + channel + ".json";
    REQUIRE(WriteFile(mf, m.dump()));
    REQUIRE(Release({"sign", "--key", priv, "--manifest", mf, "--out", out}, dir));
    Json e = Json::parse(ReadFile(out), nullptr, false);
    REQUIRE(e.is_object());
    return e;
  }
};

void Publish(CoordinatorProcess& coord, const Json& envelope) {
  HttpResult r = coord.OperatorClient().Post("/v1/agent/releases", envelope);
  REQUIRE(r.status == 201);
}

std::string LinkTarget(const std::string& path) {
  char buf[512];
  ssize_t n = readlink(path.c_str(), buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, size_t(n)) : "";
}

bool LogHas(AgentProcess& a, const std::string& text) {
  return a.Log().find(text) != std::string::npos;
}

std::vector<std::string> ReleaseArgs(const Keys& keys, const std::string& channel) {
  return {"--release-keys", keys.pub, "--release-channel", channel, "--update-interval", "0.2"};
}

const std::string kOwn = gleaner::agent::kAgentVersion;
const std::string kNext = "999.0.0";

}  // namespace

TEST_CASE("self-update: an agent installs a signed newer release, re-executes as it and works on",
          "[self_update]") {
  TempDir dir("gleaner-selfupdate");
  Fleet fleet(dir.path());
  REQUIRE(fleet.ok());
  Keys keys(dir.path(), "release");
  ArtifactServer server;
  std::string next = ReadFile(BinPath("gleaner-agent-next"));
  REQUIRE(!next.empty());
  server.Put("next", next);

  AgentProcess& a = fleet.AddAgent("a", {}, ReleaseArgs(keys, "stable"));
  std::string error;
  REQUIRE(a.Start(&error));
  pid_t pid = a.process().pid();
  std::string j1 = fleet.Submit({{"steps", 4}, {"checkpoint_every", 2}});
  REQUIRE(fleet.WaitAllFinal({j1}, Millis(60000)));
  CHECK(fleet.Job(j1)["state"] == "completed");
  std::string state = dir.File("a");
  CHECK(LinkTarget(state + "/current") == "versions/" + kOwn);

  Publish(fleet.coordinator(),
          keys.Sign(kNext, "stable", server.Url("/a/next"), int64_t(next.size()), Sha256Hex(next)));
  REQUIRE(WaitUntil([&] { return LogHas(a, "gleaner-agent " + kNext + " starting"); },
                    Millis(60000), Millis(50)));
  INFO(a.Log());
  CHECK(LogHas(a, "self-test passed"));
  CHECK(a.process().Running());
  CHECK(a.process().pid() == pid);  // re-executed in place
  CHECK(LinkTarget(state + "/current") == "versions/" + kNext);
  CHECK(LinkTarget(state + "/previous") == "versions/" + kOwn);
  CHECK(ReadFile(state + "/trust/highest_version") == kNext + "\n");
  CHECK(ReadFile(state + "/versions/" + kNext + "/gleaner-agent") == next);

  std::string j2 = fleet.Submit({{"steps", 4}, {"checkpoint_every", 2}});
  REQUIRE(fleet.WaitAllFinal({j2}, Millis(60000)));
  CHECK(fleet.Job(j2)["state"] == "completed");
  CHECK(fleet.ResultChain(j2) == ExpectedChain(0, 4) + "\n");
  // The agent logs the outcome just after the coordinator has recorded it.
  CHECK(WaitUntil([&] { return LogHas(a, "job " + j2 + ": completed"); }, Millis(10000)));
  std::string log = a.Log();
  size_t as_next = log.find("gleaner-agent " + kNext + " starting");
  CHECK(log.find("job " + j2 + ": completed", as_next) != std::string::npos);
  // The new version sees its own release and stays put.
  CHECK(a.process().Running());
}

TEST_CASE("self-update: bad releases are refused and the agent keeps its verified binary",
          "[self_update]") {
  TempDir dir("gleaner-selfupdate");
  Fleet fleet(dir.path());
  REQUIRE(fleet.ok());
  Keys keys(dir.path(), "release");
  Keys rogue(dir.path(), "rogue");
  ArtifactServer server;
  // Any bytes will do: only the last case gets as far as a self-test.
  std::string bin = "#!/bin/sh\nexit 0\n" + std::string(100000, '#');
  server.Put("bin", bin);
  server.Put("half", bin.substr(0, bin.size() / 2));
  std::string failing = "#!/bin/sh\necho self-test failing >&2\nexit 1\n";
  server.Put("failing", failing);
  std::string url = server.Url("/a/bin"), sha = Sha256Hex(bin);
  int64_t len = int64_t(bin.size());
  int64_t now = int64_t(std::time(nullptr));

  struct Case {
    std::string channel, expect;
    Json envelope;
  };
  Json forged = keys.Sign(kNext, "forged", url, len, sha);
  std::string sig = forged["signature"].get<std::string>();
  sig[10] = sig[10] == '0' ? '1' : '0';
  forged["signature"] = sig;
  std::vector<Case> cases = {
      {"forged", "signature does not verify", forged},
      {"unknown-key", "unknown key", rogue.Sign(kNext, "unknown-key", url, len, sha)},
      {"lower", "rollback refused", keys.Sign("0.0.1", "lower", url, len, sha)},
      {"expired", "expired", keys.Sign(kNext, "expired", url, len, sha, now - 60)},
      {"wrong-hash", "sha256 does not match",
       keys.Sign(kNext, "wrong-hash", url, len, Sha256Hex("other"))},
      {"truncated", "expected " + std::to_string(len),
       keys.Sign(kNext, "truncated", server.Url("/a/half"), len, sha)},
      {"oversized", "longer than", keys.Sign(kNext, "oversized", url, len - 1000, sha)},
      {"endless", "longer than", keys.Sign(kNext, "endless", server.Url("/endless"), len, sha)},
      {"self-test-fails", "failed its self-test",
       keys.Sign(kNext, "self-test-fails", server.Url("/a/failing"), int64_t(failing.size()),
                 Sha256Hex(failing))},
  };
  std::vector<AgentProcess*> agents;
  std::string error;
  for (Case& c : cases) {
    Publish(fleet.coordinator(), c.envelope);
    agents.push_back(&fleet.AddAgent(c.channel, {}, ReleaseArgs(keys, c.channel)));
    REQUIRE(agents.back()->Start(&error));
  }
  for (size_t i = 0; i < cases.size(); ++i) {
    AgentProcess& a = *agents[i];
    INFO(cases[i].channel << "\n" << a.Log());
    REQUIRE(WaitUntil([&] { return LogHas(a, "release refused"); }, Millis(60000), Millis(50)));
    CHECK(LogHas(a, cases[i].expect));
    CHECK(a.process().Running());
    std::string state = dir.File(cases[i].channel);
    CHECK(LinkTarget(state + "/current") == "versions/" + kOwn);
    CHECK(ReadFile(state + "/trust/highest_version") == kOwn + "\n");
    struct stat st;
    CHECK(stat((state + "/versions/" + kNext).c_str(), &st) != 0);
    CHECK(stat((state + "/versions/0.0.1").c_str(), &st) != 0);
  }
  // The refused release is not fetched again and again; the fleet still works.
  std::string j = fleet.Submit({{"steps", 3}});
  REQUIRE(fleet.WaitAllFinal({j}, Millis(60000)));
  CHECK(fleet.Job(j)["state"] == "completed");
  for (AgentProcess* a : agents) {
    std::string log = a->Log();
    size_t first = log.find("release refused");
    CHECK(log.find("release refused", first + 1) == std::string::npos);
    CHECK(a->process().Running());
  }
}

TEST_CASE("self-update: kill -9 at every step of the switch leaves a runnable agent",
          "[self_update]") {
  TempDir dir("gleaner-selfupdate");
  Fleet fleet(dir.path());
  REQUIRE(fleet.ok());
  Keys keys(dir.path(), "release");
  ArtifactServer server;
  std::string next = ReadFile(BinPath("gleaner-agent-next"));
  server.Put("next", next);
  Publish(fleet.coordinator(),
          keys.Sign(kNext, "stable", server.Url("/a/next"), int64_t(next.size()), Sha256Hex(next)));
  std::vector<AgentProcess*> agents;
  std::string error;
  for (int step = 1; step <= 5; ++step) {
    agents.push_back(&fleet.AddAgent("k" + std::to_string(step),
                                     {{"GLEANER_TEST_UPDATE_KILL_AT_STEP", std::to_string(step)}},
                                     ReleaseArgs(keys, "stable")));
    REQUIRE(agents.back()->Start(&error));
  }
  for (int step = 1; step <= 5; ++step) {
    AgentProcess& a = *agents[size_t(step - 1)];
    INFO("kill after step " << step << "\n" << a.Log());
    std::optional<ExitStatus> st = a.process().Wait(Millis(60000));
    REQUIRE(st);
    CHECK(st->signaled);
    CHECK(st->signal == SIGKILL);
    // Whatever `current` names is a complete binary that passed verification.
    std::string state = dir.File(a.name());
    std::string target = LinkTarget(state + "/current");
    CHECK((target == "versions/" + kOwn || target == "versions/" + kNext));
    if (target == "versions/" + kNext) {
      CHECK(ReadFile(state + "/current/gleaner-agent") == next);
    }
    // Restarted (as the service manager would) without the hook: it ends up running the new
    // version, installing it again if the switch had not happened yet.
    a.process().spec().env.clear();
    a.process().spec().env.emplace_back("GLEANER_MACHINE_ID", "machine-" + a.name());
    REQUIRE(a.process().Start(&error));
  }
  for (AgentProcess* a : agents) {
    INFO(a->name() << "\n" << a->Log());
    CHECK(WaitUntil([&] { return LogHas(*a, "gleaner-agent " + kNext + " starting"); },
                    Millis(60000), Millis(50)));
    CHECK(a->process().Running());
    CHECK(LinkTarget(dir.File(a->name()) + "/current") == "versions/" + kNext);
  }
  std::string j = fleet.Submit({{"steps", 3}});
  REQUIRE(fleet.WaitAllFinal({j}, Millis(60000)));
  CHECK(fleet.Job(j)["state"] == "completed");
}

TEST_CASE("self-update: a release that crash-loops is rolled back to the previous version",
          "[self_update]") {
  TempDir dir("gleaner-selfupdate");
  Fleet fleet(dir.path());
  REQUIRE(fleet.ok());
  Keys keys(dir.path(), "release");
  ArtifactServer server;
  // Passes its self-test, then exits 3 at every start.
  std::string crashy =
      "#!/bin/sh\n[ \"$1\" = --self-test ] && exit 0\necho crashy version exiting >&2\nexit 3\n";
  server.Put("crashy", crashy);
  Publish(fleet.coordinator(), keys.Sign("999.1.0", "stable", server.Url("/a/crashy"),
                                         int64_t(crashy.size()), Sha256Hex(crashy)));
  AgentProcess& a = fleet.AddAgent("a", {}, ReleaseArgs(keys, "stable"));
  std::string error;
  REQUIRE(a.Start(&error));
  // The installed agent is started again after each exit, as systemd's Restart=always does.
  int exits = 0;
  while (!LogHas(a, "crash-looped") && exits < 6) {
    std::optional<ExitStatus> st = a.process().Wait(Millis(60000));
    INFO(a.Log());
    REQUIRE(st);
    CHECK(st->code == 3);
    ++exits;
    REQUIRE(a.process().Start(&error));
    WaitUntil([&] { return LogHas(a, "crash-looped") || !a.process().Running(); }, Millis(30000));
  }
  INFO(a.Log());
  CHECK(exits == 3);  // the install's own re-exec, then two more starts; the third rolls back
  CHECK(LogHas(a, "version 999.1.0 crash-looped"));
  std::string state = dir.File("a");
  CHECK(LinkTarget(state + "/current") == "versions/" + kOwn);
  CHECK(ReadFile(state + "/failed/999.1.0") != "");
  // The rolled-back release is refused from now on, and the agent keeps working.
  CHECK(WaitUntil([&] { return LogHas(a, "rolled back before"); }, Millis(30000)));
  std::string j = fleet.Submit({{"steps", 3}});
  REQUIRE(fleet.WaitAllFinal({j}, Millis(60000)));
  CHECK(fleet.Job(j)["state"] == "completed");
  CHECK(a.process().Running());
}
