// Download URLs that expire while the agent is still busy downloading: the agent asks the
// coordinator for fresh ones (POST /v1/jobs/{id}/downloads) and resumes from the committed
// checkpoint instead of starting the job again from scratch.
#include <signal.h>

#include <catch2/catch.hpp>

#include "shared/sha256.h"
#include "tests/integration/agent_fleet.h"
#include "tests/integration/fault_proxy.h"

using namespace gleaner;
using namespace gleaner::testing;

namespace {

size_t Count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("a resume URL that expired during a slow input download is minted again",
          "[agent][e2e]") {
  TempDir dir("gleaner-e2e-refresh");
  // Blob URLs live 1-2 s (whole seconds: exp = now_s + 2).
  Fleet fleet(dir.path(), 0.2, {"--blob-url-ttl", "2"});
  REQUIRE(fleet.ok());
  // Storage traffic goes through a proxy (the coordinator's public URL), API calls do not: the
  // proxy plays a slow home link for downloads only.
  FaultProxy proxy(fleet.coordinator().port());
  REQUIRE(proxy.ok());
  std::string error;
  REQUIRE(fleet.RestartCoordinator(&error, {"--public-url", proxy.url()}));

  // A 6 MiB dataset: through 64 KiB chunks each held 50 ms it takes at least 96 x 50 ms = 4.8 s,
  // longer than any URL minted at the claim lives.
  std::string data(6 << 20, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = char((i * 2654435761u) >> 13);
  HttpClient dev = fleet.coordinator().Client(fleet.developer_token());
  HttpResult up =
      dev.Post("/v1/uploads",
               {{"name", "data.bin"}, {"size", int64_t(data.size())}, {"sha256", Sha256Hex(data)}});
  INFO(up.Describe());
  REQUIRE(up.status == 201);
  HttpResult put = HttpClient::Fetch("PUT", up.json()["url"].get<std::string>(), data);
  INFO(put.Describe());
  REQUIRE(put.status / 100 == 2);
  const int64_t steps = 80;
  HttpResult job = dev.Post(
      "/v1/jobs",
      {{"kind", "synthetic"},
       {"params", {{"seed", 77}, {"steps", steps}, {"step_ms", 20}, {"checkpoint_every", 10}}},
       {"dataset", {{"uri", up.json()["uri"]}, {"sha256", Sha256Hex(data)}}}});
  INFO(job.Describe());
  REQUIRE(job.status == 201);
  const std::string id = job.json()["id"].get<std::string>();

  // Agent a (fast link) trains past a checkpoint and hands the job back.
  AgentProcess& a = fleet.AddAgent("a");
  REQUIRE(a.Start(&error));
  REQUIRE(fleet.WaitCheckpoint(id, 20, Millis(30000)));
  a.process().Signal(SIGTERM);
  REQUIRE(a.process().Wait(Millis(10000)).has_value());
  Json held = fleet.Job(id);
  REQUIRE(held.value("state", "") == "pending");
  const int64_t committed = held["latest_checkpoint"].value("step", int64_t(0));
  REQUIRE(committed >= 20);

  // Agent b (slow link) claims it: the dataset download outlasts the resume URL.
  proxy.SetDelay(Millis(50));
  AgentProcess& b = fleet.AddAgent("b");
  REQUIRE(b.Start(&error));
  INFO("agent b:\n" << b.Log());
  REQUIRE(fleet.WaitAllFinal({id}, Millis(60000)));
  CHECK(fleet.Job(id).value("state", "") == "completed");
  const std::string log = b.Log();
  CHECK(Count(log, "resume checkpoint: URL refused") == 1);
  CHECK(log.find("blob URL expired") != std::string::npos);
  CHECK(log.find("resuming from checkpoint step " + std::to_string(committed)) !=
        std::string::npos);
  CHECK(log.find("starting from scratch") == std::string::npos);
  proxy.SetDelay(Millis(0));
  CHECK(fleet.ResultChain(id) == ExpectedChain(77, steps) + "\n");
}
