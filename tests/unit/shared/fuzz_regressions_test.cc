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

TEST_CASE("a long error reason or dir still formats to a line that parses back", "[fuzz]") {
  // A reason of ~4 KB of non-printable bytes parsed fine, but percent-encoding tripled it past
  // the 8 KB line limit, so FormatProgressEvent produced a line the parser refused: a trainer
  // reporting such a reason would have lost it.
  std::string raw(4000, '\xff');
  auto r = ParseProgressEvent("gleaner error reason=" + raw);
  REQUIRE(r.ok());
  CHECK(r->reason.size() == kMaxEventText);
  auto again = ParseProgressEvent(FormatProgressEvent(*r));
  REQUIRE(again.ok());
  CHECK(again->reason == r->reason);

  ProgressEvent e;
  e.type = ProgressEvent::Type::kError;
  e.reason = std::string(10000, '\n');
  auto formatted = FormatProgressEvent(e);
  CHECK(formatted.size() <= kMaxProgressLine);
  auto parsed = ParseProgressEvent(formatted);
  REQUIRE(parsed.ok());
  CHECK(parsed->reason == std::string(kMaxEventText, '\n'));

  CHECK(!ParseProgressEvent("gleaner checkpoint step=1 dir=" + std::string(3000, 'd')).ok());
  auto dir = ParseProgressEvent("gleaner checkpoint step=1 dir=" + std::string(2000, '\x01'));
  REQUIRE(dir.ok());
  auto dir_again = ParseProgressEvent(FormatProgressEvent(*dir));
  REQUIRE(dir_again.ok());
  CHECK(dir_again->dir == dir->dir);
}
