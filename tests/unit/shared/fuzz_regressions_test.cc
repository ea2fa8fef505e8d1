// Inputs found by the libFuzzer targets (tests/fuzz/) that once misbehaved; each stays here so
// the plain unit build (and the sanitizer build) keeps checking them.
#include <catch2/catch.hpp>
#include <string>

#include "shared/trainer_protocol.h"

using namespace gleaner;

TEST_CASE("progress step values beyond int64 are rejected, not overflowed", "[fuzz]") {
  // ParseInt accepted 19 digits and multiplied past INT64_MAX (signed overflow, UBSan).
  auto r = ParseProgressEvent("gleaner done step=9999999999999999999");
  REQUIRE(!r.ok());
  CHECK(r.status().code() == Code::kInvalidArgument);
  auto max = ParseProgressEvent("gleaner done step=9223372036854775807");
  REQUIRE(max.ok());
  CHECK(max->step == INT64_MAX);
  CHECK(!ParseProgressEvent("gleaner done step=9223372036854775808").ok());
  CHECK(!ParseProgressEvent("gleaner progress step=1 steps=99999999999999999999").ok());
}
