// ops:dashboard-browser — the dashboard in headless Chromium against a coordinator seeded by
// real agents: jobs that complete, one that fails on every node, one interrupted by SIGTERM
// (released and resumed), one with samples (its gallery is checked byte for byte). Then
// tests/ops/dashboard.mjs drives the page (playwright-core) and the quarantine it makes is checked
// here through the API. Skipped (exit 77; a failure in CI) only when Chromium or
// coordinator/dashboard/node_modules are missing. Screenshot: <build>/artifacts/dashboard.png.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tests/integration/agent_fleet.h"
#include "tests/skip.h"

using namespace gleaner;
using namespace gleaner::testing;

namespace {

int Fail(const std::string& why) {
  std::fprintf(stderr, "FAIL: %s\n", why.c_str());
  return 1;
}

// An executable named `name` on PATH, or "".
std::string OnPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string p = path != nullptr ? path : "/usr/bin:/bin";
  size_t start = 0;
  while (start <= p.size()) {
    size_t colon = p.find(':', start);
    if (colon == std::string::npos) colon = p.size();
    std::string candidate = p.substr(start, colon - start) + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
    start = colon + 1;
  }
  return "";
}

}  // namespace

int main() {
  const char* env_chromium = std::getenv("GLEANER_CHROMIUM");
  std::string chromium = env_chromium != nullptr ? env_chromium : "/usr/bin/chromium";
  std::string modules = std::string(GLEANER_SOURCE_DIR) + "/coordinator/dashboard/node_modules";
  std::string node = OnPath("node");
  if (access(chromium.c_str(), X_OK) != 0 || node.empty() ||
      access((modules + "/playwright-core/package.json").c_str(), R_OK) != 0 ||
      access((modules + "/uplot/dist/uPlot.iife.min.js").c_str(), R_OK) != 0) {
    return SkipOrFail("needs " + chromium + ", node and " + modules + " (infra/deps.sh)");
  }
  mkdir(GLEANER_ARTIFACT_DIR, 0755);
  const std::string shot = std::string(GLEANER_ARTIFACT_DIR) + "/dashboard.png";
  unlink(shot.c_str());

  TempDir dir("gleaner-dashboard");
  Fleet fleet(dir.path(), 0.2);
  if (!fleet.ok()) return Fail("fleet: " + fleet.error());
  HttpClient op = fleet.coordinator().OperatorClient();
  HttpResult price =
      op.Request("PUT", "/v1/prices", R"({"gpu":"cpu","usd_per_hour":0.45})", "application/json");
  if (price.status != 200) return Fail("price: " + price.Describe());

  std::vector<std::string> ids;
  for (int i = 0; i < 6; ++i) {
    Json params = {{"seed", i}, {"steps", 40 + 10 * i}, {"step_ms", 15}, {"checkpoint_every", 10}};
    ids.push_back(fleet.Submit(params));
  }
  ids.push_back(fleet.Submit({{"steps", 30}, {"step_ms", 10}, {"fail_at_step", 12}}, 2));
  // A job with samples at steps 10, 20 and 30 (two prompts each) for the gallery.
  const std::string sampled =
      fleet.Submit({{"steps", 30},
                    {"step_ms", 10},
                    {"checkpoint_every", 10},
                    {"seed", 9},
                    {"sample_prompts", Json::array({"a red fox", "a blue jay"})},
                    {"sample_every", 10},
                    {"sample_resolution", 32}});
  ids.push_back(sampled);
  for (const std::string& id : ids) {
    if (id.empty()) return Fail("submit failed");
  }
  std::string error;
  AgentProcess& a = fleet.AddAgent("a");
  AgentProcess& b = fleet.AddAgent("b");
  if (!a.Start(&error) || !b.Start(&error)) return Fail("agent: " + error);

  // Interrupt b mid-job (SIGTERM: checkpoint, release), then bring it back.
  std::string b_id;
  bool b_busy = WaitUntil(
      [&] {
        b_id = b.NodeId();
        return !b_id.empty() && !fleet.RunningJobOf(b_id, 15, 1000).empty();
      },
      Millis(30000), Millis(20));
  if (!b_busy) return Fail("agent b never ran a job past step 15:\n" + b.Log());
  b.process().Signal(SIGTERM);
  if (!b.process().Wait(Millis(15000))) return Fail("agent b ignored SIGTERM");
  if (!b.Start(&error)) return Fail("restart b: " + error);

  if (!fleet.WaitAllFinal(ids, Millis(90000))) return Fail("jobs did not finish:\n" + a.Log());
  HttpResult tick = op.Post("/v1/admin/maintenance", Json::object());
  if (tick.status != 200) return Fail("maintenance: " + tick.Describe());

  const std::string a_id = a.NodeId();
  ProcessSpec spec;
  spec.binary = node;
  spec.args = {std::string(GLEANER_SOURCE_DIR) + "/tests/ops/dashboard.mjs",
               "--url",
               fleet.coordinator().url(),
               "--token",
               fleet.coordinator().options().operator_token,
               "--node",
               a_id,
               "--samples-job",
               sampled,
               "--out",
               shot};
  spec.env = {{"GLEANER_CHROMIUM", chromium}};
  spec.stdout_path = dir.File("browser.out");
  spec.stderr_path = dir.File("browser.err");
  Process browser(spec);
  if (!browser.Start(&error)) return Fail("node: " + error);
  auto st = browser.Wait(Millis(120000));
  std::fputs(browser.Stdout().c_str(), stdout);
  std::fputs(browser.Stderr().c_str(), stderr);
  if (!st) return Fail("the browser script timed out");
  if (!st->clean()) return Fail("the browser script ended with " + st->ToString());

  // The page's quarantine, seen through the API.
  Json nodes = op.Get("/v1/nodes").json();
  bool quarantined = false;
  for (const Json& n : nodes["nodes"]) {
    if (n["id"] == a_id) quarantined = n["state"] == "quarantined";
  }
  if (!quarantined) return Fail("node " + a_id + " is not quarantined: " + nodes.dump());
  struct stat s;
  if (stat(shot.c_str(), &s) != 0 || s.st_size < 10000) return Fail("no screenshot at " + shot);
  std::printf("PASS: screenshot %s (%lld bytes)\n", shot.c_str(), (long long)s.st_size);
  return 0;
}
