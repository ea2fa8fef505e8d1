// bench_coordinator: throughput of gleaner-coordinator on loopback, in one run:
//   /healthz (the ceiling: the same server doing no work), heartbeats, claims, submissions (of the
//   developer who owns every pending job, so the per-key limit is checked against a full queue),
//   maintenance ticks (POST /v1/admin/maintenance).
// The database holds JOBS jobs and NODES nodes (bulk-loaded with SQL after one job and the keys
// were made through the API); the first half of the nodes hold a running lease each (heartbeats),
// the other half claim pending jobs. `--only submit --jobs N` for N = 2, 10000, 100000 shows
// whether a submission's cost depends on the queue (docs/benchmarks.md). Each phase: CONNS
// keep-alive connections from one epoll thread (loadgen.h), requests/s, p50/p99 latency, and the
// coordinator's CPU time per request from /proc/<pid>/stat, so the figures hold on a machine shared
// with the load generator.
//   bench_coordinator [--seconds 5] [--connections 64] [--jobs 100000] [--nodes 10000]
//                     [--group-commit true|false] [--log-level warn] [--keep DIR]
//                     [--only heartbeat|claim|submit|tick]  (healthz and that phase)
// Prints a Markdown table and one JSON line. Exit 1 if a claim was handed out twice.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>

#include "coordinator/native/db/sqlite_executor.h"
#include "shared/sha256.h"
#include "tests/bench/coordinator/loadgen.h"
#include "tests/integration/coordinator_fixture.h"
#include "tests/integration/harness.h"

using namespace gleaner;
using namespace gleaner::testing;
using gleaner::bench::LoadOptions;
using gleaner::bench::LoadResult;

namespace {

std::string NodeToken(int i) {
  return "glt_" + Sha256Hex("bench-node-" + std::to_string(i));
}
std::string Id(const char* prefix, int i) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%s%06d", prefix, i);
  return buf;
}

int Die(const std::string& what) {
  std::fprintf(stderr, "bench_coordinator: %s\n", what.c_str());
  return 1;
}

struct Phase {
  std::string name;
  LoadResult load;
  double cpu_us_per_req = 0;
  double batches_per_commit = 0;  // write batches per transaction (one fsync each)
};

// A counter from GET /metrics, 0 if absent.
double MetricValue(const std::string& text, const std::string& name) {
  size_t at = text.find("\n" + name + " ");
  return at == std::string::npos ? 0 : std::atof(text.c_str() + at + name.size() + 2);
}

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> a = {
      {"seconds", "5"},         {"connections", "64"}, {"jobs", "100000"}, {"nodes", "10000"},
      {"group-commit", "true"}, {"log-level", "warn"}, {"keep", ""},       {"only", ""}};
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    if (k.rfind("--", 0) != 0 || !a.count(k.substr(2))) return Die("unknown flag " + k);
    a[k.substr(2)] = argv[i + 1];
  }
  const double seconds = std::atof(a["seconds"].c_str());
  const int conns = std::atoi(a["connections"].c_str());
  const int jobs = std::atoi(a["jobs"].c_str());
  const int nodes = std::atoi(a["nodes"].c_str());
  const int hb_nodes = nodes / 2;
  if (jobs < nodes || nodes < 2) return Die("need jobs >= nodes >= 2");

  TempDir dir("gleaner-bench-coord");
  std::string base = a["keep"].empty() ? dir.path() : a["keep"];
  CoordinatorOptions o;
  o.heartbeat_interval_s = 30;
  o.maintenance_period_s = 3600;
  o.extra_args = {"--threads", std::to_string(conns + 32), "--log-level", a["log-level"],
                  "--group-commit", a["group-commit"], "--keep-alive-timeout", "30",
                  // Each simulated node sends far more than an agent would (2/s per node is the
                  // default); the developer owns the whole bulk-loaded queue.
                  "--node-rate-limit", "off", "--developer-rate-limit", "off",
                  "--operator-rate-limit", "off", "--max-active-jobs", "1000000000"};
  std::string error;
  std::string template_job;
  std::string operator_key;
  std::string developer_key;
  {
    CoordinatorProcess setup(base, o);
    if (!setup.Start(&error)) return Die(error);
    auto dev = CreateKey(setup, "developer", &error);
    if (!dev) return Die(error);
    developer_key = *dev;
    auto op = CreateKey(setup, "operator", &error);
    if (!op) return Die(error);
    operator_key = *op;
    HttpClient d = setup.Client(*dev);
    auto job = SubmitSyntheticJob(d, 1000, 100, &error);
    if (!job) return Die(error);
    template_job = *job;
    setup.process().Stop();
  }
  // Bulk load: jobs copied from the template, nodes with known tokens, running leases.
  {
    native::SqliteOptions so;
    so.path = base + "/db.sqlite";
    auto db = native::SqliteExecutor::Open(so);
    if (!db.ok()) return Die(db.status().ToString());
    core::Batch b;
    b.Add(
        "WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i < ?2 - 1) "
        "INSERT INTO jobs (id, owner_key_id, kind, spec, state, priority, max_failures, "
        "min_vram_mb, steps_total, created_at, updated_at) "
        "SELECT printf('j_b%06d', i), owner_key_id, kind, spec, 'pending', priority, "
        "max_failures, min_vram_mb, steps_total, created_at + i, created_at + i "
        "FROM jobs, s WHERE jobs.id = ?1",
        {template_job, jobs});
    const int64_t now = int64_t(time(nullptr)) * 1000;
    for (int i = 0; i < nodes; ++i) {
      b.Add(
          "INSERT INTO nodes (id, machine_id, token_hash, gpu_name, vram_mb, agent_version, "
          "registered_at, last_seen_at) VALUES (?, ?, ?, 'RTX 4090', 24564, '0.1.0', ?, ?)",
          {Id("n_b", i), Id("bench-", i), Sha256Hex(NodeToken(i)), now, now});
    }
    b.Add(
        "UPDATE jobs SET state = 'running', lease_epoch = 1, attempts = 1, lease_nonce = id, "
        "node_id = 'n_b' || substr(id, 4), lease_expires_at = ?, first_started_at = ? "
        "WHERE id >= 'j_b' AND id < ?",
        {now + int64_t(86400) * 1000 * 30, now, Id("j_b", hb_nodes)});
    b.Add(
        "INSERT INTO segments (job_id, epoch, node_id, gpu_name, usd_per_hour, "
        "heartbeat_interval_s, started_at, step_start, step_end, step_committed) "
        "SELECT id, 1, node_id, 'RTX 4090', 0.324, 30, ?, 0, 0, 0 FROM jobs WHERE state = "
        "'running'",
        {now});
    b.Add("ANALYZE");
    auto r = (*db)->Execute(b);
    if (!r.status.ok()) return Die("bulk load: " + r.status.ToString());
  }

  CoordinatorProcess coord(base, o);
  if (!coord.Start(&error)) return Die(error);
  const pid_t pid = coord.process().pid();
  const std::string host = "Host: 127.0.0.1:" + std::to_string(coord.port()) + "\r\n";
  auto post = [&](const std::string& path, const std::string& token, const std::string& body) {
    return "POST " + path + " HTTP/1.1\r\n" + host + "Authorization: Bearer " + token +
           "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
           "\r\n\r\n" + body;
  };

  std::vector<Phase> phases;
  auto run = [&](const std::string& name, LoadOptions lo) {
    if (!a["only"].empty() && a["only"] != name && name != "healthz") return;
    if (a["only"] == name) std::fprintf(stderr, "coordinator pid %d\n", int(pid));
    lo.port = coord.port();
    lo.connections = conns;
    lo.duration_s = seconds;
    HttpClient ops = coord.Client(operator_key);
    const std::string m0 = ops.Get("/metrics").body;
    long long t0 = CpuTicks(pid);
    // CPU is sampled around the whole run; requests during warm-up are few and counted in.
    LoadResult r = bench::RunLoad(lo);
    long long t1 = CpuTicks(pid);
    const std::string m1 = ops.Get("/metrics").body;
    Phase p;
    const double commits =
        MetricValue(m1, "gleaner_db_commits_total") - MetricValue(m0, "gleaner_db_commits_total");
    p.batches_per_commit = commits > 0 ? (MetricValue(m1, "gleaner_db_committed_batches_total") -
                                          MetricValue(m0, "gleaner_db_committed_batches_total")) /
                                             commits
                                       : 0;
    p.name = name;
    p.load = r;
    double total = double(r.requests) * (r.seconds + lo.warmup_s) / r.seconds;
    p.cpu_us_per_req = total > 0 ? double(t1 - t0) * 1e6 / double(sysconf(_SC_CLK_TCK)) / total : 0;
    phases.push_back(p);
  };

  LoadOptions health;
  health.request = [&](int, int64_t) { return "GET /healthz HTTP/1.1\r\n" + host + "\r\n"; };
  health.check = [](int status, const std::string&) { return status == 200; };
  run("healthz", health);

  LoadOptions hb;
  hb.request = [&](int c, int64_t n) {
    int i = int((int64_t(c) + n * conns) % hb_nodes);
    std::string body = "{\"epoch\":1,\"step\":" + std::to_string(n % 1000 + 1) + ",\"loss\":0.1}";
    return post("/v1/jobs/" + Id("j_b", i) + "/heartbeat", NodeToken(i), body);
  };
  int64_t hb_bad = 0;
  hb.check = [&](int status, const std::string&) {
    if (status != 200) ++hb_bad;
    return status == 200;
  };
  run("heartbeat", hb);

  std::vector<std::string> claimed;
  LoadOptions claim;
  claim.request = [&](int c, int64_t n) {
    int i = hb_nodes + int((int64_t(c) + n * conns) % (nodes - hb_nodes));
    return post("/v1/work", NodeToken(i), "{}");
  };
  // Each node holds one lease at a time: once every free node holds one (the index wraps),
  // a node's next claim is answered 204 (Gleaner-Lease-Held), which is the rule at work.
  int64_t claims_held = 0;
  claim.check = [&](int status, const std::string& body) {
    if (status == 204) {
      ++claims_held;
      return true;
    }
    if (status != 200) return false;
    size_t at = body.find("\"id\":\"");
    if (at == std::string::npos) return false;
    claimed.push_back(body.substr(at + 6, body.find('"', at + 6) - at - 6));
    return true;
  };
  run("claim", claim);

  LoadOptions submit;
  const std::string job_body =
      "{\"kind\":\"synthetic\",\"params\":{\"steps\":1000,\"checkpoint_every\":100}}";
  submit.request = [&](int, int64_t) { return post("/v1/jobs", developer_key, job_body); };
  submit.check = [](int status, const std::string&) { return status == 201; };
  run("submit", submit);

  LoadOptions tick;
  tick.request = [&](int, int64_t) { return post("/v1/admin/maintenance", operator_key, "{}"); };
  tick.check = [](int status, const std::string&) { return status == 200; };
  run("tick", tick);

  std::set<std::string> unique(claimed.begin(), claimed.end());
  const size_t doubles = claimed.size() - unique.size();
  coord.process().Stop();

  const double ceiling = phases[0].load.rps();
  std::printf(
      "| phase | req/s | x ceiling | p50 ms | p99 ms | CPU us/req | batches/commit | errors | "
      "reconnects |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const Phase& p : phases) {
    std::printf("| %s | %.0f | %.2f | %.2f | %.2f | %.1f | %.1f | %lld | %lld |\n", p.name.c_str(),
                p.load.rps(), ceiling > 0 ? p.load.rps() / ceiling : 0, p.load.Percentile(50),
                p.load.Percentile(99), p.cpu_us_per_req, p.batches_per_commit,
                (long long)p.load.errors, (long long)p.load.reconnects);
  }
  std::printf("claims in the window: %zu, handed out twice: %zu, refused (lease held): %lld\n",
              claimed.size(), doubles, static_cast<long long>(claims_held));
  Json out = {{"connections", conns},
              {"jobs", jobs},
              {"nodes", nodes},
              {"group_commit", a["group-commit"]},
              {"double_assignments", doubles}};
  for (const Phase& p : phases) {
    out[p.name] = {{"rps", p.load.rps()},
                   {"p50_ms", p.load.Percentile(50)},
                   {"p99_ms", p.load.Percentile(99)},
                   {"cpu_us_per_req", p.cpu_us_per_req},
                   {"batches_per_commit", p.batches_per_commit},
                   {"errors", p.load.errors}};
  }
  std::printf("%s\n", DumpJson(out).c_str());
  return doubles == 0 ? 0 : 1;
}
