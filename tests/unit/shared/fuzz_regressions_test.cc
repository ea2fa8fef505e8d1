// Inputs found by the libFuzzer targets (tests/fuzz/) that once misbehaved; each stays here so
// the plain unit build (and the sanitizer build) keeps checking them.
#include <catch2/catch.hpp>
#include <string>

#include "agent/protocol/trainer_protocol.h"
#include "shared/safetensors.h"

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

TEST_CASE("a safetensors tensor with an empty name is refused, as Serialize refuses it", "[fuzz]") {
  // Parse accepted {"": {...}} but Serialize refuses the empty name, so a parsed file could not
  // be written back (found by safetensors_fuzz; the input is kept in its corpus).
  std::string header = R"({"":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                       R"("b":{"dtype":"BF16","shape":[2,1],"data_offsets":[8,12]}})";
  std::string file(8, '\0');
  for (int i = 0; i < 8; ++i) file[size_t(i)] = char((header.size() >> (8 * i)) & 0xff);
  file += header + std::string(12, '\0');
  auto r = safetensors::Parse(file);
  REQUIRE(!r.ok());
  CHECK(r.status().message().find("empty name") != std::string::npos);
  // The same file with a name parses and round-trips.
  std::string named = R"({"a":)" + header.substr(4);
  std::string file2(8, '\0');
  for (int i = 0; i < 8; ++i) file2[size_t(i)] = char((named.size() >> (8 * i)) & 0xff);
  file2 += named + std::string(12, '\0');
  auto ok = safetensors::Parse(file2);
  REQUIRE(ok.ok());
  CHECK(ok->tensors.size() == 2);
}
