// Billing math: per segment, per group, CSV, and the job's cost_usd, against hand-computed
// figures.
#include "coordinator/core/cost.h"

#include "tests/unit/core/test_env.h"

using namespace gleaner;
using namespace gleaner::testing;
using core::CostFigures;
using core::SegmentCost;
using core::SegmentFacts;

TEST_CASE("segment cost: billable = heartbeats x interval, wasted share past the commit",
          "[cost]") {
  SegmentFacts s;
  s.heartbeats = 4;
  s.heartbeat_interval_s = 30;
  s.usd_per_hour = 3.6;
  s.step_start = 0;
  s.step_end = 40;
  s.step_committed = 30;
  CostFigures done = SegmentCost(s);
  CHECK(done.steps == 40);
  CHECK(done.billable_seconds == Approx(120));
  CHECK(done.cost_usd == Approx(0.12));
  CHECK(done.wasted_seconds == 0);  // not ended unfinished
  s.ended_unfinished = true;
  CostFigures lost = SegmentCost(s);
  CHECK(lost.wasted_seconds == Approx(30));  // 120 x (40 - 30) / 40
  CHECK(lost.wasted_cost_usd == Approx(0.03));
  // Resumed at 50, reached 80, committed nothing new (step_committed = step_start = 50).
  SegmentFacts r{10, 30, 1.8, 50, 80, 50, true};
  CostFigures rc = SegmentCost(r);
  CHECK(rc.steps == 30);
  CHECK(rc.cost_usd == Approx(0.15));
  CHECK(rc.wasted_seconds == Approx(300));
  // No progress at all: nothing to attribute, no division by zero.
  SegmentFacts idle{2, 30, 1.8, 10, 10, 10, true};
  CostFigures ic = SegmentCost(idle);
  CHECK(ic.steps == 0);
  CHECK(ic.wasted_seconds == 0);
  CHECK(ic.CostPerStep() < 0);
}

namespace {
// J1 (100 steps): node A (H100, $3.6/h) 4 heartbeats to step 40, commit 30, stalls; node B
// (T4, default $1.8/h) resumes at 30, 3 heartbeats, completes.
// J2 (50 steps): node A, 2 heartbeats to step 20, no commit, released.
struct Scenario {
  std::string j1, j2, a, b;
  int64_t t0 = 0, t_second = 0;
};
Scenario Run(TestEnv& env) {
  Scenario s;
  REQUIRE(
      env.Put("/v1/prices", env.operator_token, {{"gpu", "H100"}, {"usd_per_hour", 3.6}}).status ==
      200);
  REQUIRE(env.Put("/v1/prices", env.operator_token, {{"gpu", "*"}, {"usd_per_hour", 1.8}}).status ==
          200);
  std::string dev = env.Developer();
  s.j1 = env.Submit(dev, 100, 1);
  s.j2 = env.Submit(dev, 50, 0);
  NodeRef a = env.Node("a", 80000, "H100"), b = env.Node("b", 16000, "T4");
  s.a = a.id;
  s.b = b.id;
  s.t0 = env.now_ms;
  REQUIRE(env.ClaimedJob(a) == s.j1);
  for (int64_t step : {10, 20, 30}) {
    env.Advance(30);
    REQUIRE(env.Heartbeat(a, s.j1, 1, step).status == 200);
  }
  REQUIRE(env.Checkpoint(a, s.j1, 1, 30).status == 200);
  env.Advance(30);
  REQUIRE(env.Heartbeat(a, s.j1, 1, 40).status == 200);
  env.Advance(61);
  s.t_second = env.now_ms;
  REQUIRE(env.ClaimedJob(b) == s.j1);
  REQUIRE(env.ClaimedJob(a) == s.j2);
  for (int64_t step : {60, 80, 100}) {
    env.Advance(30);
    REQUIRE(env.Heartbeat(b, s.j1, 2, step).status == 200);
    if (step <= 80) REQUIRE(env.Heartbeat(a, s.j2, 1, step / 4).status == 200);
  }
  REQUIRE(env.Complete(b, s.j1, 2).status == 200);
  REQUIRE(env.Post("/v1/jobs/" + s.j2 + "/release", a.token, {{"epoch", 1}}).status == 200);
  return s;
}
}  // namespace

TEST_CASE("cost report by job, gpu and node reconciles with hand-computed figures", "[cost]") {
  TestEnv env;
  Scenario s = Run(env);
  Resp r = env.Get("/v1/reports/cost?group_by=job", env.operator_token);
  REQUIRE(r.status == 200);
  REQUIRE(r.json["groups"].size() == 2);
  Json j1, j2;
  for (const Json& g : r.json["groups"]) (g["key"] == s.j1 ? j1 : j2) = g;
  CHECK(j1["segments"] == 2);
  CHECK(j1["steps"] == 110);  // 40 + (100 - 30)
  CHECK(j1["billable_seconds"].get<double>() == Approx(210));
  CHECK(j1["cost_usd"].get<double>() == Approx(0.165));  // 0.12 + 0.045
  CHECK(j1["cost_per_step"].get<double>() == Approx(0.0015));
  CHECK(j1["wasted_seconds"].get<double>() == Approx(30));
  CHECK(j1["wasted_cost_usd"].get<double>() == Approx(0.03));
  CHECK(j2["steps"] == 20);
  CHECK(j2["cost_usd"].get<double>() == Approx(0.06));
  CHECK(j2["wasted_seconds"].get<double>() == Approx(60));
  CHECK(j2["wasted_cost_usd"].get<double>() == Approx(0.06));
  const Json& t = r.json["totals"];
  CHECK(t["segments"] == 3);
  CHECK(t["steps"] == 130);
  CHECK(t["billable_seconds"].get<double>() == Approx(270));
  CHECK(t["cost_usd"].get<double>() == Approx(0.225));
  CHECK(t["wasted_cost_usd"].get<double>() == Approx(0.09));
  // The job view's cost_usd is the same figure.
  CHECK(env.Get("/v1/jobs/" + s.j1, env.operator_token).json["cost_usd"].get<double>() ==
        Approx(0.165));
  Resp gpu = env.Get("/v1/reports/cost?group_by=gpu&format=csv", env.operator_token);
  REQUIRE(gpu.status == 200);
  CHECK(gpu.content_type.rfind("text/csv", 0) == 0);
  CHECK(gpu.body ==
        "group,segments,steps,billable_seconds,cost_usd,cost_per_step,wasted_seconds,"
        "wasted_cost_usd,queue_wait_median_s,queue_wait_p95_s,sampling_seconds,sampling_cost_usd,"
        "verification_seconds,verification_cost_usd\n"
        "H100,2,60,180,0.18,0.003,90,0.09,0,181,0,0,0,0\n"
        "T4,1,70,90,0.045,0.000642857142857,0,0,61,61,0,0,0,0\n"
        "total,3,130,270,0.225,0.00173076923077,90,0.09,61,181,0,0,0,0\n");
  Resp node = env.Get("/v1/reports/cost?group_by=node", env.operator_token);
  REQUIRE(node.json["groups"].size() == 2);
  Resp day = env.Get("/v1/reports/cost?group_by=day", env.operator_token);
  REQUIRE(day.json["groups"].size() == 1);
  CHECK(day.json["groups"][0]["key"] == core::FormatTime(s.t0).substr(0, 10));
  // Window: only the first segment started before t_second.
  Resp early = env.Get("/v1/reports/cost?group_by=job&to=" + core::FormatTime(s.t_second),
                       env.operator_token);
  REQUIRE(early.json["groups"].size() == 1);
  CHECK(early.json["totals"]["steps"] == 40);
  Resp late =
      env.Get("/v1/reports/cost?from=" + std::to_string(s.t_second / 1000), env.operator_token);
  CHECK(late.json["totals"]["segments"] == 2);
  CHECK(env.Get("/v1/reports/cost?group_by=planet", env.operator_token).status == 400);
  CHECK(env.Get("/v1/reports/cost?format=xml", env.operator_token).status == 400);
  CHECK(env.Get("/v1/reports/cost?from=yesterday", env.operator_token).status == 400);
}

TEST_CASE("prices: default row '*', upsert, validation", "[cost]") {
  TestEnv env;
  Resp list = env.Get("/v1/prices", env.operator_token);
  REQUIRE(list.status == 200);
  CHECK(list.json["default_usd_per_hour"].get<double>() == Approx(0.324));
  REQUIRE(
      env.Put("/v1/prices", env.operator_token, {{"gpu", "A100"}, {"usd_per_hour", 1.2}}).status ==
      200);
  REQUIRE(
      env.Put("/v1/prices", env.operator_token, {{"gpu", "A100"}, {"usd_per_hour", 1.4}}).status ==
      200);
  list = env.Get("/v1/prices", env.operator_token);
  REQUIRE(list.json["prices"].size() == 2);
  CHECK(list.json["prices"][1]["gpu"] == "A100");
  CHECK(list.json["prices"][1]["usd_per_hour"].get<double>() == Approx(1.4));
  CHECK(env.Put("/v1/prices", env.operator_token, {{"gpu", "A100"}, {"usd_per_hour", -1}}).status ==
        400);
  CHECK(env.Put("/v1/prices", env.operator_token, {{"usd_per_hour", 1}}).status == 400);
}

TEST_CASE("ParseTime accepts RFC 3339, dates and Unix seconds", "[cost]") {
  int64_t ms = 0;
  REQUIRE(core::ParseTime("2026-11-27T06:00:00.123Z", &ms));
  CHECK(ms == 1795759200123);
  REQUIRE(core::ParseTime("2000-02-29", &ms));
  CHECK(ms == 951782400000);
  REQUIRE(core::ParseTime("1795759200", &ms));
  CHECK(ms == 1795759200000);
  for (const char* bad : {"", "2026-13-01", "2026-11-27T06:00:00", "2026-11-27 06:00:00Z", "-5",
                          "2026-11-27T06:00:00+01:00", "abc"}) {
    INFO(bad);
    CHECK_FALSE(core::ParseTime(bad, &ms));
  }
}
