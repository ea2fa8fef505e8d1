// The local pool provider end to end: the coordinator's autoscaler starts gleaner-agent
// processes, a bad node is quarantined and its instance really recycled (its replacement gets
// work), every chain is exact, and the pool scales to zero after the idle window.
#include <dirent.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <map>
#include <set>

#include "tests/integration/agent_fleet.h"

using namespace gleaner;
using namespace gleaner::testing;

namespace {

// Names in dir that start with prefix.
std::set<std::string> Entries(const std::string& dir, const std::string& prefix) {
  std::set<std::string> out;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    std::string n = e->d_name;
    if (n.rfind(prefix, 0) == 0) out.insert(n);
  }
  closedir(d);
  return out;
}

std::set<std::string> PoolDirs(const std::string& dir) {
  return Entries(dir, "local-");
}

}  // namespace

TEST_CASE("local pool: autoscaled agents, bad node reallocated, replacement works, scale to zero",
          "[pool][e2e]") {
  TempDir dir("gleaner-pool-local");
  // The first agent the pool starts ("local-<ms>-1") fails every job it runs.
  std::string wrapper = dir.File("agent-wrapper.sh");
  // Each agent's environment is kept, to check which secrets it was given.
  REQUIRE(WriteFile(wrapper, "#!/bin/sh\nenv > \"" + dir.File("agent-env-") +
                                 "$$\"\ncase \" $* \" in *\"-1 \"*) "
                                 "export GLEANER_SYNTHETIC_FAIL_AT_STEP=1;; esac\nexec \"" +
                                 BinPath("gleaner-agent") + "\" \"$@\"\n"));
  REQUIRE(chmod(wrapper.c_str(), 0755) == 0);
  const std::string pool_dir = dir.File("pool");
  Fleet fleet(dir.path(), 0.2,
              {"--pool-provider", "local", "--pool-agent-bin", wrapper, "--pool-dir", pool_dir,
               "--pool-agent-args", "--max-poll-interval 0.2 --shutdown-deadline 5", "--max-nodes",
               "2", "--quarantine-failures", "2", "--idle-window", "1"});
  REQUIRE(fleet.ok());
  std::map<std::string, int64_t> seeds;
  std::vector<std::string> ids;
  for (int i = 0; i < 8; ++i) {
    std::string id =
        fleet.Submit({{"seed", 70 + i}, {"steps", 120}, {"step_ms", 10}, {"checkpoint_every", 20}});
    REQUIRE(!id.empty());
    ids.push_back(id);
    seeds[id] = 70 + i;
  }
  REQUIRE(fleet.WaitAllFinal(ids, Millis(90000)));
  for (const std::string& id : ids) {
    Json job = fleet.Job(id);
    INFO(DumpJson(job));
    REQUIRE(job["state"] == "completed");
    CHECK(fleet.ResultChain(id) == ExpectedChain(seeds[id], 120) + "\n");
  }
  HttpClient op = fleet.coordinator().OperatorClient();
  // The agents enrolled with an enroll key of their own, never the operator token.
  int envs = 0;
  for (const std::string& f : Entries(dir.path(), "agent-env-")) {
    ++envs;
    const std::string env = ReadFile(dir.File(f));
    CHECK(env.find(CoordinatorOptions().operator_token) == std::string::npos);
    size_t at = env.find("GLEANER_ENROLL_TOKEN=");
    REQUIRE(at != std::string::npos);
    const std::string token = env.substr(at + 21, env.find('\n', at) - at - 21);
    CHECK(fleet.coordinator().Client(token).Get("/v1/nodes").status == 403);  // not an operator
  }
  CHECK(envs >= 3);
  bool pool_key = false;
  const Json keys = op.Get("/v1/keys").json();  // outlives the loop below
  for (const Json& k : keys["keys"]) {
    pool_key = pool_key || (k["name"] == "local-pool" && k["role"] == "enroll");
  }
  CHECK(pool_key);
  Json nodes = op.Get("/v1/nodes").json()["nodes"];
  INFO(DumpJson(nodes));
  std::string bad_machine;
  int64_t bad_changed = 0;
  for (const Json& n : nodes) {
    std::string m = n["machine_id"].get<std::string>();
    if (m.size() > 2 && m.compare(m.size() - 2, 2, "-1") == 0) {
      bad_machine = m;
      CHECK(n["state"] == "quarantined");
      CHECK(n["jobs_failed"] == 2);
      CHECK(n["jobs_completed"] == 0);
    }
  }
  REQUIRE(!bad_machine.empty());
  // The bad node's instance was recycled: a third agent started after it and did work.
  bool replacement_worked = false;
  for (const Json& n : nodes) {
    std::string m = n["machine_id"].get<std::string>();
    if (m.size() > 2 && m.compare(m.size() - 2, 2, "-3") == 0) {
      replacement_worked = n["jobs_completed"].get<int64_t>() > 0;
    }
  }
  (void)bad_changed;
  CHECK(replacement_worked);
  CHECK(ReadFile(fleet.coordinator().StderrPath()).find("pool: reallocated quarantined node") !=
        std::string::npos);
  // No work for the idle window: every agent is stopped and its state dir removed.
  CHECK(WaitUntil([&] { return PoolDirs(pool_dir).empty(); }, Millis(30000)));
  INFO(ReadFile(fleet.coordinator().StderrPath()).substr(0, 4000));
  CHECK(PoolDirs(pool_dir).empty());
}
