#include "coordinator/core/settings.h"

#include <catch2/catch.hpp>
#include <set>

using namespace gleaner;
using namespace gleaner::core;

TEST_CASE("each setting's default is in its range and survives its own text", "[settings]") {
  const CoreConfig defaults;
  std::set<std::string> names;
  for (const Setting& s : CoreSettings()) {
    INFO(s.name);
    CHECK(names.insert(s.name).second);  // one name, once
    CHECK(FindCoreSetting(s.name) == &s);
    CHECK(std::string(s.doc).find('\n') == std::string::npos);
    const std::string text = s.get(defaults);
    if (s.kind == SettingKind::kSeconds || s.kind == SettingKind::kInt) {
      Result<SettingValue> v = ParseSettingValue(s.kind, text, s.min, s.max);
      INFO(text << ": " << v.status().ToString());
      CHECK(v.ok());
    }
    // Writing the default's text back changes nothing.
    CoreConfig again;
    REQUIRE(ApplyCoreSetting(&again, s, text, s.name).ok());
    CHECK(s.get(again) == text);
  }
  CHECK(FindCoreSetting("no-such-setting") == nullptr);
}

TEST_CASE("values are parsed in one syntax and errors name their origin", "[settings]") {
  CoreConfig c;
  REQUIRE(ApplyCoreSetting(&c, *FindCoreSetting("heartbeat-interval"), "0.25", "--x").ok());
  CHECK(c.heartbeat_interval_s == 0.25);
  REQUIRE(ApplyCoreSetting(&c, *FindCoreSetting("developer-rate-limit"), "3:30", "--x").ok());
  CHECK(c.developer_rate.per_second == 3);
  CHECK(c.developer_rate.burst == 30);
  REQUIRE(ApplyCoreSetting(&c, *FindCoreSetting("s3-virtual-hosted"), "yes", "--x").ok());
  CHECK_FALSE(c.s3.path_style);
  REQUIRE(ApplyCoreSetting(&c, *FindCoreSetting("public-url"), "https://a.example//", "--x").ok());
  CHECK(c.public_url == "https://a.example");

  Status st = ApplyCoreSetting(&c, *FindCoreSetting("keep-checkpoints"), "101", "GLEANER_X");
  CHECK(st.message() == "GLEANER_X: must be in [1, 100], got '101'");
  st = ApplyCoreSetting(&c, *FindCoreSetting("max-nodes"), "-1", "--max-nodes");
  CHECK(st.message() == "--max-nodes: expected a non-negative integer, got '-1'");
  st = ApplyCoreSetting(&c, *FindCoreSetting("retry-after"), "soon", "f.conf:3 retry-after");
  CHECK(st.message().find("f.conf:3 retry-after: expected a non-negative number") == 0);
  CHECK(SettingEnvName("max-pending-upload-bytes") == "GLEANER_MAX_PENDING_UPLOAD_BYTES");
}

TEST_CASE("stall-after follows the heartbeat interval unless given", "[settings]") {
  CoreConfig c;
  c.heartbeat_interval_s = 7;
  DeriveCoreDefaults(&c, {"heartbeat-interval"});
  CHECK(c.stall_after_s == 14);
  c.stall_after_s = 100;
  DeriveCoreDefaults(&c, {"stall-after"});
  CHECK(c.stall_after_s == 100);
  CHECK(SettingDefault(*FindCoreSetting("stall-after")) == "2 x heartbeat-interval");
  CHECK(SettingDefault(*FindCoreSetting("max-body")) == "1048576");
}
