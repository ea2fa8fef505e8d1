// --ca-file / GLEANER_CA_FILE: a readable PEM file is required; there is no option to skip
// certificate verification.
#include <catch2/catch.hpp>
#include <cstdlib>

#include "agent/supervisor/config.h"
#include "shared/native/files.h"
#include "test_util.h"

using namespace gleaner;
using namespace gleaner::agent;

namespace {
const char* kPem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
}  // namespace

TEST_CASE("agent config: a CA file given by --ca-file must hold a PEM certificate",
          "[config][tls]") {
  testing::TempDir t;
  REQUIRE(files::WriteSynced(t / "ca.pem", kPem).ok());
  REQUIRE(files::WriteSynced(t / "junk.pem", "not a certificate").ok());
  const std::vector<std::string> base = {"--coordinator", "https://c.example", "--state-dir", "/s"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = base;
    a.insert(a.end(), extra.begin(), extra.end());
    return testing::ParseAgentArgs(a);
  };
  auto c = with({});
  REQUIRE(c.ok());
  CHECK(c->ca_file.empty());  // system CAs
  c = with({"--ca-file", t / "ca.pem"});
  REQUIRE(c.ok());
  CHECK(c->ca_file == t / "ca.pem");
  setenv("GLEANER_CA_FILE", (t / "ca.pem").c_str(), 1);
  c = with({});
  unsetenv("GLEANER_CA_FILE");
  REQUIRE(c.ok());
  CHECK(c->ca_file == t / "ca.pem");

  c = with({"--ca-file", t / "missing.pem"});
  REQUIRE_FALSE(c.ok());
  CHECK(c.status().message().rfind("--ca-file: ", 0) == 0);
  c = with({"--ca-file", t / "junk.pem"});
  REQUIRE_FALSE(c.ok());
  CHECK(c.status().message() == "--ca-file: no PEM certificate in " + t / "junk.pem");
  for (const char* flag : {"--insecure", "--no-verify", "--tls-verify"}) {
    INFO(flag);
    CHECK_FALSE(with({flag, "0"}).ok());
  }
  CHECK(std::string(AgentUsage()).find("--ca-file") != std::string::npos);
}
