// Operator reports: the cost report reconciles with the segments table summed independently
// here; queue history, autoscaler history, the cost-per-step histogram and /metrics, as JSON and
// CSV.
#include <algorithm>
#include <cmath>
#include <map>

#include "tests/unit/core/test_env.h"

using namespace gleaner;
using namespace gleaner::testing;

namespace {

// A fleet's day: three nodes on two GPU classes; jobs that complete, get released (SIGTERM),
// stall (SIGKILL), fail, and one that is canceled while pending.
struct World {
  std::string done, released, stalled, failed, canceled;
  NodeRef a, b, c;
  int64_t t0 = 0;
};

World Build(TestEnv& env) {
  World w;
  REQUIRE(
      env.Put("/v1/prices", env.operator_token, {{"gpu", "H100"}, {"usd_per_hour", 2.5}}).status ==
      200);
  std::string dev = env.Developer();
  w.t0 = env.now_ms;
  w.done = env.Submit(dev, 40, 5);
  w.released = env.Submit(dev, 60, 4);
  w.stalled = env.Submit(dev, 60, 3);
  w.failed = env.Submit(dev, 30, 2, {{"max_failures", 1}});
  env.Advance(7);
  w.canceled = env.Submit(dev, 10, -5);
  w.a = env.Node("a", 80000, "H100");
  w.b = env.Node("b", 24000, "RTX 4090");
  w.c = env.Node("c", 24000, "RTX 4090");
  env.Advance(3);
  REQUIRE(env.ClaimedJob(w.a) == w.done);
  env.Advance(2);
  REQUIRE(env.ClaimedJob(w.b) == w.released);
  env.Advance(4);
  REQUIRE(env.ClaimedJob(w.c) == w.stalled);
  for (int64_t step : {10, 20, 30}) {
    env.Advance(30);
    REQUIRE(env.Heartbeat(w.a, w.done, 1, step).status == 200);
    REQUIRE(env.Heartbeat(w.b, w.released, 1, step).status == 200);
    REQUIRE(env.Heartbeat(w.c, w.stalled, 1, step).status == 200);
    if (step == 20) {
      REQUIRE(env.Checkpoint(w.b, w.released, 1, 20).status == 200);
      REQUIRE(env.Checkpoint(w.c, w.stalled, 1, 20).status == 200);
    }
  }
  env.Advance(30);
  REQUIRE(env.Heartbeat(w.a, w.done, 1, 40).status == 200);
  REQUIRE(env.Complete(w.a, w.done, 1).status == 200);
  REQUIRE(env.Post("/v1/jobs/" + w.released + "/release", w.b.token, {{"epoch", 1}}).status == 200);
  env.Advance(5);
  REQUIRE(env.ClaimedJob(w.a) == w.released);  // resumes at 20 on the H100
  REQUIRE(env.ClaimedJob(w.b) == w.failed);
  env.Advance(30);
  REQUIRE(env.Heartbeat(w.a, w.released, 2, 45).status == 200);
  REQUIRE(env.Heartbeat(w.b, w.failed, 1, 12).status == 200);
  REQUIRE(env.Post("/v1/jobs/" + w.failed + "/fail", w.b.token, {{"epoch", 1}, {"reason", "oom"}})
              .status == 200);
  env.Advance(45);
  REQUIRE(env.Heartbeat(w.a, w.released, 2, 50).status == 200);
  env.Advance(45);  // node c's lease (last heartbeat at +106 s) has expired
  REQUIRE(env.Post("/v1/admin/maintenance", env.operator_token).status == 200);
  REQUIRE(env.ClaimedJob(w.b) == w.stalled);  // resumes at 20 on b
  REQUIRE(env.Heartbeat(w.a, w.released, 2, 60).status == 200);
  REQUIRE(env.Complete(w.a, w.released, 2).status == 200);
  env.Advance(30);
  REQUIRE(env.Heartbeat(w.b, w.stalled, 2, 50).status == 200);
  REQUIRE(env.Post("/v1/jobs/" + w.canceled + "/cancel", env.operator_token).status == 200);
  return w;
}

struct Expect {
  int64_t segments = 0, steps = 0;
  double billable = 0, cost = 0, wasted = 0, wasted_cost = 0;
  std::vector<double> waits;
};

double NearestRank(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  size_t k = size_t(std::ceil(p / 100.0 * double(v.size())));
  return v[std::max<size_t>(k, 1) - 1];
}

// Sums the segments table with its own SQL and arithmetic (not the core's cost.h).
std::map<std::string, Expect> Independent(TestEnv& env, const std::string& key_sql) {
  Rows rows = env.Query(
      "SELECT " + key_sql +
      " AS k, heartbeats * heartbeat_interval_s AS billable, "
      "heartbeats * heartbeat_interval_s * usd_per_hour / 3600.0 AS cost, "
      "MAX(step_end - step_start, 0) AS steps, "
      "CASE WHEN ended_at IS NOT NULL AND end_reason <> 'completed' THEN "
      "  heartbeats * heartbeat_interval_s * MAX(step_end - MAX(step_committed, step_start), 0) "
      "  / MAX(step_end - step_start, 1) ELSE 0 END AS wasted, usd_per_hour, "
      "(started_at - COALESCE((SELECT MAX(p.ended_at) FROM segments p WHERE p.job_id = "
      "s.job_id AND p.epoch < s.epoch), (SELECT created_at FROM jobs j WHERE j.id = s.job_id))) "
      "/ 1000.0 AS wait FROM segments s");
  std::map<std::string, Expect> out;
  for (size_t i = 0; i < rows.rows.size(); ++i) {
    for (const std::string& k : {rows.Get(i, "k").AsText(), std::string("total")}) {
      Expect& e = out[k];
      e.segments++;
      e.steps += rows.Get(i, "steps").AsInt();
      e.billable += rows.Get(i, "billable").AsReal();
      e.cost += rows.Get(i, "cost").AsReal();
      e.wasted += rows.Get(i, "wasted").AsReal();
      e.wasted_cost += rows.Get(i, "wasted").AsReal() * rows.Get(i, "usd_per_hour").AsReal() / 3600;
      e.waits.push_back(rows.Get(i, "wait").AsReal());
    }
  }
  return out;
}

void CheckGroup(const Json& g, const Expect& e) {
  INFO(g.dump());
  CHECK(g["segments"] == e.segments);
  CHECK(g["steps"] == e.steps);
  CHECK(g["billable_seconds"].get<double>() == Approx(e.billable).epsilon(1e-12));
  CHECK(g["cost_usd"].get<double>() == Approx(e.cost).epsilon(1e-12));
  CHECK(g["wasted_seconds"].get<double>() == Approx(e.wasted).epsilon(1e-12));
  CHECK(g["wasted_cost_usd"].get<double>() == Approx(e.wasted_cost).epsilon(1e-12));
  CHECK(g["queue_wait_median_s"].get<double>() == Approx(NearestRank(e.waits, 50)));
  CHECK(g["queue_wait_p95_s"].get<double>() == Approx(NearestRank(e.waits, 95)));
  if (e.steps > 0) CHECK(g["cost_per_step"].get<double>() == Approx(e.cost / double(e.steps)));
}

}  // namespace

TEST_CASE("cost report reconciles with the segments summed independently", "[reports]") {
  TestEnv env;
  World w = Build(env);
  REQUIRE(env.Scalar("SELECT count(*) FROM segments") == 6);
  const std::pair<const char*, const char*> groupings[] = {
      {"job", "job_id"},
      {"node", "node_id"},
      {"gpu", "gpu_name"},
      {"day", "strftime('%Y-%m-%d', started_at / 1000, 'unixepoch')"}};
  for (const auto& [by, sql] : groupings) {
    Resp r = env.Get(std::string("/v1/reports/cost?group_by=") + by, env.operator_token);
    REQUIRE(r.status == 200);
    auto expect = Independent(env, sql);
    INFO("group_by " << by);
    REQUIRE(r.json["groups"].size() == expect.size() - 1);
    for (const Json& g : r.json["groups"]) {
      REQUIRE(expect.count(g["key"].get<std::string>()) == 1);
      CheckGroup(g, expect[g["key"].get<std::string>()]);
    }
    CheckGroup(r.json["totals"], expect["total"]);
  }
  // Hand-checked queue waits: "done" waited 10 s for its first lease; "released" 5 s between
  // its release and the H100 picking it up; "stalled" from its last heartbeat (c) to b's claim.
  Resp by_job = env.Get("/v1/reports/cost?group_by=job", env.operator_token);
  std::map<std::string, Json> g;
  for (const Json& x : by_job.json["groups"]) g[x["key"].get<std::string>()] = x;
  CHECK(g[w.done]["queue_wait_p95_s"].get<double>() == Approx(10));
  CHECK(g[w.released]["queue_wait_median_s"].get<double>() == Approx(5));  // waits 12, 5
  CHECK(g[w.released]["queue_wait_p95_s"].get<double>() == Approx(12));
  CHECK(g.count(w.canceled) == 0);
  // The CSV carries the same figures, with a total row.
  Resp csv = env.Get("/v1/reports/cost?group_by=gpu&format=csv", env.operator_token);
  REQUIRE(csv.status == 200);
  CHECK(csv.body.rfind("group,segments,steps,billable_seconds,cost_usd,cost_per_step,"
                       "wasted_seconds,wasted_cost_usd,queue_wait_median_s,queue_wait_p95_s,"
                       "sampling_seconds,sampling_cost_usd,verification_seconds,"
                       "verification_cost_usd\n",
                       0) == 0);
  CHECK(csv.body.find("\nH100,") != std::string::npos);
  CHECK(csv.body.find("\ntotal,6,") != std::string::npos);
  // Window: from after everything started -> empty groups, null figures.
  Resp empty = env.Get("/v1/reports/cost?from=" + std::to_string(env.now_ms / 1000 + 10),
                       env.operator_token);
  REQUIRE(empty.status == 200);
  CHECK(empty.json["groups"].empty());
  CHECK(empty.json["totals"]["queue_wait_median_s"].is_null());
  CHECK(env.Get("/v1/reports/cost?from=2027-01-02&to=2027-01-01", env.operator_token).status ==
        400);
}

TEST_CASE("queue history is rebuilt from jobs and segments", "[reports]") {
  TestEnv env;
  World w = Build(env);
  Resp r = env.Get("/v1/reports/queue?points=2&from=" + std::to_string(w.t0 / 1000 - 1) +
                       "&to=" + core::FormatTime(env.now_ms),
                   env.operator_token);
  REQUIRE(r.status == 200);
  REQUIRE(r.json["points"].size() == 2);
  const Json& before = r.json["points"][0];
  CHECK(before["pending"] == 0);
  CHECK(before["running"] == 0);
  const Json& now = r.json["points"][1];
  // Now: "stalled" runs on b; done + released completed; failed failed; one canceled.
  CHECK(now["running"] == 1);
  CHECK(now["pending"] == 0);
  CHECK(now["completed"] == 2);
  CHECK(now["failed"] == 1);
  CHECK(now["canceled"] == 1);
  CHECK(now["running"].get<int64_t>() ==
        env.Scalar("SELECT count(*) FROM jobs WHERE state = 'running'"));
  // Right after the third claim: three running, two pending (failed, canceled).
  int64_t t_claims = w.t0 + 16000;
  Resp mid = env.Get("/v1/reports/queue?points=3&from=" + core::FormatTime(w.t0) +
                         "&to=" + core::FormatTime(w.t0 + 2 * (t_claims - w.t0)),
                     env.operator_token);
  REQUIRE(mid.status == 200);
  CHECK(mid.json["points"][1]["running"] == 3);
  CHECK(mid.json["points"][1]["pending"] == 2);
  CHECK(mid.json["points"][0]["pending"] == 4);  // at t0 the fifth job did not exist yet
  // Default window starts at the first job; CSV has one line per point.
  Resp def = env.Get("/v1/reports/queue?points=10&format=csv", env.operator_token);
  REQUIRE(def.status == 200);
  CHECK(def.body.rfind(
            "at,pending,running,completed,failed,canceled\n" + core::FormatTime(w.t0) + ",", 0) ==
        0);
  CHECK(std::count(def.body.begin(), def.body.end(), '\n') == 11);
  // Only `to`, before every job: an hour up to it, all zero.
  Resp early = env.Get("/v1/reports/queue?points=2&to=2020-01-01", env.operator_token);
  REQUIRE(early.status == 200);
  CHECK(early.json["from"] == "2019-12-31T23:00:00.000Z");
  CHECK(early.json["points"][1]["completed"] == 0);
  CHECK(env.Get("/v1/reports/queue?points=1", env.operator_token).status == 400);
  CHECK(env.Get("/v1/reports/queue?points=abc", env.operator_token).status == 400);
  CHECK(env.Get("/v1/reports/queue", env.Developer()).status == 403);
}

TEST_CASE("autoscaler history: target vs nodes seen, oldest first", "[reports]") {
  auto config = TestConfig();
  config.autoscale_min = 1;
  config.autoscale_max = 2;
  TestEnv env(config);
  std::string dev = env.Developer();
  REQUIRE(env.Post("/v1/admin/maintenance", env.operator_token).status == 200);
  env.Submit(dev);
  env.Submit(dev);
  env.Submit(dev);
  NodeRef n = env.Node("n");
  env.ClaimedJob(n);
  env.Advance(10);
  REQUIRE(env.Post("/v1/admin/maintenance", env.operator_token).status == 200);
  Resp r = env.Get("/v1/reports/autoscaler", env.operator_token);
  REQUIRE(r.status == 200);
  REQUIRE(r.json["events"].size() == 2);
  CHECK(r.json["events"][0]["target"] == 1);  // clamp(0, 1, 2)
  CHECK(r.json["events"][0]["current"] == 0);
  CHECK(r.json["events"][1]["target"] == 2);  // clamp(3, 1, 2)
  CHECK(r.json["events"][1]["current"] == 1);
  CHECK(r.json["events"][1]["running"] == 1);
  CHECK(r.json["events"][1]["pending"] == 2);
  Resp one = env.Get("/v1/reports/autoscaler?limit=1&format=csv", env.operator_token);
  REQUIRE(one.status == 200);
  CHECK(one.body == "at,running,pending,current,target,min,max\n" + core::FormatTime(env.now_ms) +
                        ",1,2,1,2,1,2\n");
  CHECK(env.Get("/v1/reports/autoscaler?limit=0", env.operator_token).status == 400);
}

TEST_CASE("cost-per-step histogram counts each job with trained steps once", "[reports]") {
  TestEnv env;
  World w = Build(env);
  Resp r = env.Get("/v1/reports/cost-per-step?bins=4", env.operator_token);
  REQUIRE(r.status == 200);
  CHECK(r.json["jobs"] == 4);  // the canceled job never ran
  REQUIRE(r.json["bins"].size() == 4);
  int64_t total = 0;
  for (const Json& b : r.json["bins"]) total += b["jobs"].get<int64_t>();
  CHECK(total == 4);
  Resp by_job = env.Get("/v1/reports/cost?group_by=job", env.operator_token);
  double lo = 1e9, hi = 0;
  for (const Json& g : by_job.json["groups"]) {
    lo = std::min(lo, g["cost_per_step"].get<double>());
    hi = std::max(hi, g["cost_per_step"].get<double>());
  }
  CHECK(r.json["min"].get<double>() == Approx(lo));
  CHECK(r.json["max"].get<double>() == Approx(hi));
  CHECK(r.json["bins"][0]["jobs"].get<int64_t>() >= 1);
  CHECK(r.json["bins"][3]["jobs"].get<int64_t>() >= 1);
  Resp csv = env.Get("/v1/reports/cost-per-step?bins=2&format=csv", env.operator_token);
  REQUIRE(csv.status == 200);
  CHECK(csv.body.rfind("lo,hi,jobs\n", 0) == 0);
  CHECK(std::count(csv.body.begin(), csv.body.end(), '\n') == 3);
  (void)w;
  CHECK(env.Get("/v1/reports/cost-per-step?bins=0", env.operator_token).status == 400);
  TestEnv fresh;
  Resp none = fresh.Get("/v1/reports/cost-per-step", fresh.operator_token);
  REQUIRE(none.status == 200);
  CHECK(none.json["jobs"] == 0);
  CHECK(none.json["min"].is_null());
}

TEST_CASE("/metrics: database gauges in the Prometheus text format, operator only", "[reports]") {
  TestEnv env;
  World w = Build(env);
  REQUIRE(env.Post("/v1/nodes/" + w.c.id + "/quarantine", env.operator_token).status == 200);
  Resp r = env.Get("/metrics", env.operator_token);
  REQUIRE(r.status == 200);
  CHECK(r.content_type.rfind("text/plain; version=0.0.4", 0) == 0);
  const std::string& m = r.body;
  for (const char* line :
       {"gleaner_jobs{state=\"pending\"} 0\n", "gleaner_jobs{state=\"running\"} 1\n",
        "gleaner_jobs{state=\"completed\"} 2\n", "gleaner_jobs{state=\"failed\"} 1\n",
        "gleaner_jobs{state=\"canceled\"} 1\n", "gleaner_nodes{state=\"active\"} 2\n",
        "gleaner_nodes{state=\"quarantined\"} 1\n", "gleaner_segments 6\n",
        "# TYPE gleaner_blob_bytes gauge\n", "gleaner_autoscaler_target "}) {
    INFO(line);
    CHECK(m.find(line) != std::string::npos);
  }
  int64_t bytes = env.Scalar("SELECT SUM(size) FROM blobs");
  CHECK(m.find("gleaner_blob_bytes " + std::to_string(bytes) + "\n") != std::string::npos);
  Resp cost = env.Get("/v1/reports/cost", env.operator_token);
  double usd = cost.json["totals"]["cost_usd"].get<double>();
  size_t at = m.find("\ngleaner_cost_usd ");
  REQUIRE(at != std::string::npos);
  CHECK(std::stod(m.substr(at + 18)) == Approx(usd));
  CHECK(env.Get("/metrics", "").status == 401);
  CHECK(env.Get("/metrics", env.Developer()).status == 403);
}
