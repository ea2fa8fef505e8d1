// The shell's maintenance thread runs the core's tick on its own: stalled leases are closed and
// the autoscaler target is recorded without any request.
#include <catch2/catch.hpp>

#include "coordinator/native/db/sqlite_executor.h"
#include "tests/integration/coordinator_fixture.h"
#include "tests/integration/harness.h"

using namespace gleaner;
using namespace gleaner::testing;

namespace {
core::Rows Query(const std::string& db_path, const std::string& sql,
                 std::vector<core::SqlValue> params = {}) {
  auto db = native::SqliteExecutor::Open({db_path});
  REQUIRE(db.ok());
  core::Batch b;
  b.Add(sql, std::move(params));
  auto r = (*db)->Execute(b);
  REQUIRE(r.status.ok());
  return r.results[0];
}
}  // namespace

TEST_CASE("maintenance ticks reap stalled leases and record the autoscaler target",
          "[coordinator][maintenance]") {
  TempDir dir;
  CoordinatorOptions o;
  o.heartbeat_interval_s = 0.2;  // stall after 0.4 s
  o.maintenance_period_s = 0.1;
  o.extra_args = {"--min-nodes", "1", "--max-nodes", "5"};
  CoordinatorProcess coord(dir.path(), o);
  std::string error;
  REQUIRE(coord.Start(&error));
  auto dev = CreateKey(coord, "developer", &error);
  auto enroll = CreateKey(coord, "enroll", &error);
  REQUIRE(dev);
  REQUIRE(enroll);
  auto node = RegisterNode(coord, *enroll, "m-stall", 24000, &error);
  REQUIRE(node);
  HttpClient d = coord.Client(*dev);
  for (int i = 0; i < 7; ++i) REQUIRE(SubmitSyntheticJob(d, 10, 5, &error));
  HttpResult work = coord.Client(node->token).Post("/v1/work", Json::object());
  REQUIRE(work.status == 200);
  std::string job = work.json()["job"]["id"].get<std::string>();

  // The node goes silent; a tick after stall-after closes its segment as 'stalled'.
  const std::string db = dir.File("db.sqlite");
  CHECK(WaitUntil(
      [&] {
        core::Rows r = Query(db, "SELECT end_reason FROM segments WHERE job_id = ?", {job});
        return !r.empty() && r.rows[0][0].AsText() == "stalled";
      },
      Millis(10000), Millis(50)));
  std::string log = coord.process().Stderr();
  CHECK(log.find("\"msg\":\"maintenance\"") != std::string::npos);
  CHECK(log.find(job) != std::string::npos);  // the tick's summary names the stalled job

  // Autoscaler: 1 running + 6 pending, clamped to max 5.
  core::Rows ev = Query(db,
                        "SELECT target, min_nodes, max_nodes FROM scaling_events "
                        "ORDER BY id DESC LIMIT 1");
  REQUIRE(!ev.empty());
  CHECK(ev.rows[0][0].AsInt() == 5);
  CHECK(ev.rows[0][1].AsInt() == 1);
  CHECK(ev.rows[0][2].AsInt() == 5);

  // The stalled job is claimable again, with a new epoch.
  auto other = RegisterNode(coord, *enroll, "m-other", 24000, &error);
  REQUIRE(other);
  HttpResult again = coord.Client(other->token).Post("/v1/work", Json::object());
  REQUIRE(again.status == 200);
  CHECK(again.json()["job"]["id"] == job);
  CHECK(again.json()["lease"]["epoch"] == 2);
}
