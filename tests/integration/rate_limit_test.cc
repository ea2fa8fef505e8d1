// Rate limits through the real server: 429 + Retry-After once a token's burst is spent, recovery
// after the refill time, other tokens unaffected; the active-jobs limit per developer key.
#include <catch2/catch.hpp>
#include <chrono>

#include "tests/integration/coordinator_fixture.h"

using namespace gleaner;
using namespace gleaner::testing;

TEST_CASE("a token over its rate gets 429 with Retry-After and recovers after the window",
          "[ratelimit][integration]") {
  TempDir dir("gleaner-ratelimit");
  CoordinatorOptions o;
  o.extra_args = {"--developer-rate-limit", "2:3", "--max-active-jobs", "1"};
  CoordinatorProcess coord(dir.path(), o);
  std::string error;
  REQUIRE(coord.Start(&error));
  auto token = CreateKey(coord, "developer", &error);
  auto other_token = CreateKey(coord, "developer", &error);
  REQUIRE(token);
  REQUIRE(other_token);
  HttpClient dev = coord.Client(*token);
  HttpClient other = coord.Client(*other_token);

  for (int i = 0; i < 3; ++i) REQUIRE(dev.Get("/v1/jobs").status == 200);
  HttpResult limited = dev.Get("/v1/jobs");
  const auto refused_at = std::chrono::steady_clock::now();
  REQUIRE(limited.status == 429);
  CHECK(limited.json()["error"]["code"] == "rate_limited");
  CHECK(limited.Header("Retry-After") == "1");
  // Another developer and the operator are not held back by this token's bucket.
  CHECK(other.Get("/v1/jobs").status == 200);
  CHECK(coord.OperatorClient().Get("/v1/jobs").status == 200);
  // One token is back 0.5 s after the burst was spent (2 per second); refused tries cost none.
  REQUIRE(WaitUntil([&] { return dev.Get("/v1/jobs").status == 200; }, Millis(5000), Millis(50)));
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - refused_at).count();
  CHECK(waited >= 0.3);
  CHECK(waited < 3.0);

  // The active-jobs limit holds on the real server too (a fresh key: a full bucket).
  auto jobs_token = CreateKey(coord, "developer", &error);
  REQUIRE(jobs_token);
  HttpClient submitter = coord.Client(*jobs_token);
  REQUIRE(SubmitSyntheticJob(submitter, 10, 5, &error));
  HttpResult second =
      submitter.Post("/v1/jobs", {{"kind", "synthetic"}, {"params", {{"steps", 10}}}});
  CHECK(second.status == 429);
  CHECK(second.json()["error"]["code"] == "too_many_jobs");
  CHECK(second.Header("Retry-After").empty());
}
