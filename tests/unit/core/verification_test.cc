// The pure pieces of verified training (coordinator/core/verification.h); the verdicts (SQL)
// and routes are checked end to end by tests/integration/verification_test.cc and
// tests/conformance.
#include "coordinator/core/verification.h"

#include <catch2/catch.hpp>
#include <string>

using namespace gleaner::core;

TEST_CASE("verification draw: uniform on the unit interval and a function of the entropy only") {
  int below_tenth = 0;
  double lo = 1, hi = 0;
  for (int i = 0; i < 10000; ++i) {
    const double u = VerificationDraw("entropy-" + std::to_string(i));
    REQUIRE(u >= 0);
    REQUIRE(u < 1);
    lo = std::min(lo, u);
    hi = std::max(hi, u);
    below_tenth += u < 0.1;
  }
  // 10,000 draws at p = 0.1: mean 1000, sd 30; 6 sd either side.
  CHECK(below_tenth > 820);
  CHECK(below_tenth < 1180);
  CHECK(lo < 0.001);
  CHECK(hi > 0.999);
  CHECK(VerificationDraw("same") == VerificationDraw("same"));
  CHECK(VerificationDraw("same") != VerificationDraw("other"));
}

TEST_CASE("verification keys live under the job") {
  CHECK(VerificationKey("j_1", "v_2", 3) == "jobs/j_1/verify/v_2/e3");
}
