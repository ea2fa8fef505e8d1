// bench_fleet: the reference fleet run in compressed time. A real gleaner-coordinator whose
// autoscaler drives a local pool of real gleaner-agent processes (--pool-provider local), real
// gleaner-train children running synthetic jobs, and faults:
//   - random SIGKILL / SIGTERM of agents (the pool replaces them),
//   - one bad node (the pool's first agent) that fails every job until it is quarantined and its
//     instance reallocated,
//   - a coordinator SIGKILL + restart once half the jobs are done (agents are adopted).
// Every duration of the reference (30 s heartbeats, 60 s stall, 60 s maintenance, 600 s idle
// window, 1 s per training step) is multiplied by --scale; the price per node-hour is divided by
// it, so reported dollars are those of the real-time run.
//   bench_fleet [--jobs 1000] [--steps 1400] [--max-nodes 40] [--scale 0.01] [--price 0.324]
//               [--kill-every 20] [--restart true] [--timeout 1800] [--json FILE]
// (--kill-every is in reference seconds × 1/scale... i.e. wall seconds between faults.)
// Prints a summary table; exit 0 only if every job completed with the exact chain.
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <random>
#include <string>

#include "coordinator/native/db/sqlite_executor.h"
#include "tests/integration/agent_fleet.h"

using namespace gleaner;
using namespace gleaner::testing;

namespace {

using Steady = std::chrono::steady_clock;

double Seconds(Steady::time_point since) {
  return std::chrono::duration<double>(Steady::now() - since).count();
}

std::vector<std::pair<std::string, pid_t>> PoolAgents(const std::string& dir) {
  std::vector<std::pair<std::string, pid_t>> out;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    std::string n = e->d_name;
    if (n.rfind("local-", 0) != 0) continue;
    pid_t pid = pid_t(std::atol(ReadFile(dir + "/" + n + "/agent.pid").c_str()));
    if (pid > 1 && kill(pid, 0) == 0) out.emplace_back(n, pid);
  }
  closedir(d);
  return out;
}

core::Rows Query(const std::string& db, const std::string& sql) {
  native::SqliteOptions o;
  o.path = db;
  auto ex = native::SqliteExecutor::Open(o);
  if (!ex.ok()) return {};
  core::Batch b;
  b.Add(sql);
  auto r = (*ex)->Execute(b);
  return r.status.ok() ? r.results[0] : core::Rows{};
}

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(q * double(v.size())))];
}

int Die(const std::string& what) {
  std::fprintf(stderr, "bench_fleet: %s\n", what.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> a = {
      {"jobs", "1000"},   {"steps", "1400"},          {"max-nodes", "40"}, {"scale", "0.01"},
      {"price", "0.324"}, {"kill-every", "20"},       {"restart", "true"}, {"timeout", "1800"},
      {"json", ""},       {"checkpoint-every", "100"}};
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    if (k.rfind("--", 0) != 0 || !a.count(k.substr(2))) return Die("unknown flag " + k);
    a[k.substr(2)] = argv[i + 1];
  }
  const int jobs = std::atoi(a["jobs"].c_str());
  const int64_t steps = std::atoll(a["steps"].c_str());
  const double f = std::atof(a["scale"].c_str());
  const double price = std::atof(a["price"].c_str());
  const double kill_every = std::atof(a["kill-every"].c_str());
  const double timeout = std::atof(a["timeout"].c_str());
  auto secs = [&](double reference_s) { return std::to_string(reference_s * f); };

  TempDir dir("gleaner-bench-fleet", MemoryTempBase());
  const std::string pool_dir = dir.File("pool");
  const std::string wrapper = dir.File("agent.sh");
  // The first agent the pool ever starts is the bad node: it fails every job (mkdir is atomic).
  // Its pid (kept by exec) is recorded so that random faults spare it: a bad node killed before
  // its third failure would never be quarantined, and the run would say nothing about quarantine.
  const std::string bad_pid_file = dir.File("bad-node.pid");
  WriteFile(wrapper,
            "#!/bin/sh\nif mkdir \"" + dir.File("bad-node-taken") +
                "\" 2>/dev/null; then export GLEANER_SYNTHETIC_FAIL_AT_STEP=1; echo $$ > \"" +
                bad_pid_file + "\"; fi\nexec \"" + BinPath("gleaner-agent") + "\" \"$@\"\n");
  chmod(wrapper.c_str(), 0755);
  std::string agent_args = "--max-poll-interval " + std::to_string(std::max(0.1, 5 * f)) +
                           " --shutdown-deadline " + std::to_string(std::max(3.0, 20 * f));
  Fleet fleet(dir.path(), 30 * f,
              {"--stall-after",
               secs(60),
               "--maintenance-period",
               secs(60),
               "--idle-window",
               secs(600),
               "--retry-after",
               std::to_string(std::max(0.1, 5 * f)),
               "--min-nodes",
               "0",
               "--max-nodes",
               a["max-nodes"],
               "--pool-provider",
               "local",
               "--pool-agent-bin",
               wrapper,
               "--pool-dir",
               pool_dir,
               "--pool-agent-args",
               agent_args,
               "--log-level",
               "warn",
               "--threads",
               "128"});
  if (!fleet.ok()) return Die(fleet.error());
  HttpClient op = fleet.coordinator().OperatorClient();
  HttpResult pr =
      op.Request("PUT", "/v1/prices", DumpJson(Json{{"gpu", "*"}, {"usd_per_hour", price / f}}),
                 "application/json");
  if (pr.status != 200) return Die("prices: " + pr.Describe());
  const std::string db = dir.File("db.sqlite");

  Steady::time_point t0 = Steady::now();
  std::vector<std::string> ids;
  std::map<std::string, int64_t> seeds;
  for (int i = 0; i < jobs; ++i) {
    std::string id =
        fleet.Submit({{"seed", 9000 + i},
                      {"steps", steps},
                      {"step_ms", int64_t(1000 * f)},
                      {"checkpoint_every", std::atoll(a["checkpoint-every"].c_str())}});
    if (id.empty()) return Die("submit failed");
    ids.push_back(id);
    seeds[id] = 9000 + i;
  }
  std::fprintf(stderr, "submitted %d jobs in %.1f s\n", jobs, Seconds(t0));

  std::mt19937 rng(42);
  int sigkills = 0, sigterms = 0;
  bool restarted = a["restart"] != "true";
  double next_fault = kill_every;
  int64_t done = 0, failed = 0;
  Steady::time_point last_print = Steady::now();
  while (Seconds(t0) < timeout) {
    core::Rows counts = Query(db, "SELECT state, count(*) FROM jobs GROUP BY state");
    std::map<std::string, int64_t> by;
    for (const auto& row : counts.rows) by[row[0].AsText()] = row[1].AsInt();
    done = by["completed"];
    failed = by["failed"] + by["canceled"];
    if (done + failed >= jobs) break;
    if (Seconds(last_print) > 10) {
      last_print = Steady::now();
      std::fprintf(stderr, "t=%.0fs completed=%lld running=%lld pending=%lld agents=%zu\n",
                   Seconds(t0), (long long)done, (long long)by["running"], (long long)by["pending"],
                   PoolAgents(pool_dir).size());
    }
    if (kill_every > 0 && Seconds(t0) >= next_fault) {
      next_fault += kill_every;
      auto agents = PoolAgents(pool_dir);
      const pid_t bad_pid = pid_t(std::atol(ReadFile(bad_pid_file).c_str()));
      agents.erase(std::remove_if(agents.begin(), agents.end(),
                                  [&](const auto& agent) { return agent.second == bad_pid; }),
                   agents.end());
      if (!agents.empty()) {
        auto& victim = agents[rng() % agents.size()];
        bool hard = rng() % 2 == 0;
        kill(victim.second, hard ? SIGKILL : SIGTERM);
        (hard ? sigkills : sigterms) += 1;
      }
    }
    if (!restarted && done * 2 >= jobs) {
      restarted = true;
      std::string error;
      if (!fleet.RestartCoordinator(&error)) return Die("restart: " + error);
      op = fleet.coordinator().OperatorClient();
      std::fprintf(stderr, "coordinator restarted at t=%.0fs\n", Seconds(t0));
    }
    usleep(200000);
  }
  const double wall = Seconds(t0);

  // Results: every chain exact.
  int completed = 0, exact = 0;
  for (const std::string& id : ids) {
    Json job = fleet.Job(id);
    if (job.value("state", "") != "completed") continue;
    ++completed;
    if (fleet.ResultChain(id) == ExpectedChain(seeds[id], steps) + "\n") ++exact;
  }
  Json cost = op.Get("/v1/reports/cost?group_by=job").json();
  Json totals = cost.contains("totals") ? cost["totals"] : Json::object();
  double cost_usd = totals.value("cost_usd", 0.0);
  double wasted = totals.value("wasted_cost_usd", 0.0);
  std::vector<double> queue;
  for (const auto& row :
       Query(db,
             "SELECT first_started_at - created_at FROM jobs WHERE first_started_at IS NOT NULL")
           .rows) {
    queue.push_back(double(row[0].AsInt()) / 1000.0 / f);  // reference seconds
  }
  core::Rows bad = Query(db,
                         "SELECT machine_id, state, jobs_failed FROM nodes WHERE jobs_failed > 0 "
                         "ORDER BY jobs_failed DESC LIMIT 1");
  int64_t bad_failed = bad.empty() ? -1 : bad.rows[0][2].AsInt();
  std::string bad_state = bad.empty() ? "?" : bad.rows[0][1].AsText();
  core::Rows scaling = Query(db, "SELECT target, current FROM scaling_events ORDER BY id");
  int changes = 0;
  int64_t last = -1, peak = 0;
  std::string trail;
  for (const auto& row : scaling.rows) {
    int64_t t = row[0].AsInt();
    peak = std::max(peak, t);
    if (t != last) {
      ++changes;
      if (changes <= 12) trail += (trail.empty() ? "" : " → ") + std::to_string(t);
      last = t;
    }
  }
  core::Rows nodes = Query(db, "SELECT count(*) FROM nodes");
  // Let the idle window pass so the pool scales to zero and nothing is left running.
  WaitUntil([&] { return PoolAgents(pool_dir).empty(); }, Millis(int64_t(1000 * (700 * f + 30))));
  bool drained = PoolAgents(pool_dir).empty();
  for (auto& [m, pid] : PoolAgents(pool_dir)) kill(pid, SIGKILL);

  const double useful_steps = double(jobs) * double(steps);
  std::printf("| metric | value |\n|---|---|\n");
  std::printf("| jobs completed (chain.txt exact) | %d/%d (%d exact) |\n", completed, jobs, exact);
  std::printf("| wall time | %.0f s (scale %.3g: %.1f reference hours) |\n", wall, f,
              wall / f / 3600);
  std::printf("| cost | $%.2f |\n", cost_usd);
  std::printf("| cost per step (billed steps / useful steps) | $%.6f / $%.6f |\n",
              totals.value("cost_per_step", 0.0), cost_usd / useful_steps);
  std::printf("| wasted share | %.1f %% |\n", cost_usd > 0 ? 100 * wasted / cost_usd : 0);
  std::printf("| queue time median / p95 (reference s) | %.0f / %.0f |\n", Quantile(queue, 0.5),
              Quantile(queue, 0.95));
  std::printf("| bad node: jobs failed before quarantine | %lld (%s) |\n", (long long)bad_failed,
              bad_state.c_str());
  std::printf("| faults | %d SIGKILL, %d SIGTERM, coordinator restart: %s |\n", sigkills, sigterms,
              a["restart"].c_str());
  std::printf("| nodes registered | %lld |\n",
              nodes.empty() ? 0LL : (long long)nodes.rows[0][0].AsInt());
  std::printf("| scaling decisions | %zu ticks, %d target changes, peak %lld: %s |\n",
              scaling.rows.size(), changes, (long long)peak, trail.c_str());
  std::printf("| pool drained to zero after the idle window | %s |\n", drained ? "yes" : "no");
  Json out = {{"jobs", jobs},
              {"completed", completed},
              {"exact", exact},
              {"wall_s", wall},
              {"scale", f},
              {"cost_usd", cost_usd},
              {"cost_per_step", cost_usd / useful_steps},
              {"wasted_share", cost_usd > 0 ? wasted / cost_usd : 0},
              {"queue_median_s", Quantile(queue, 0.5)},
              {"queue_p95_s", Quantile(queue, 0.95)},
              {"bad_node_failures", bad_failed},
              {"bad_node_state", bad_state},
              {"sigkill", sigkills},
              {"sigterm", sigterms},
              {"scaling_ticks", scaling.rows.size()},
              {"target_changes", changes},
              {"peak_target", peak},
              {"drained", drained}};
  std::printf("%s\n", DumpJson(out).c_str());
  if (!a["json"].empty()) WriteFile(a["json"], DumpJson(out) + "\n");
  bool ok = completed == jobs && exact == jobs && bad_state == "quarantined" && drained;
  return ok ? 0 : 1;
}
