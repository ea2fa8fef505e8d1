#include "coordinator/native/options.h"

#include <catch2/catch.hpp>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

using namespace gleaner;
using namespace gleaner::native;

namespace {

struct World {
  std::map<std::string, std::string> env;
  std::map<std::string, std::string> files;
  Result<ServeOptions> Parse(std::vector<std::string> args) {
    return ParseServeOptions(
        args,
        [this](const std::string& n) -> const char* {
          auto it = env.find(n);
          return it == env.end() ? nullptr : it->second.c_str();
        },
        [this](const std::string& p) -> Result<std::string> {
          auto it = files.find(p);
          if (it == files.end()) return Status::NotFound("no such file");
          return it->second;
        });
  }
};

const std::vector<std::string> kRequired = {"--db", "x.db", "--data-dir", "d"};

std::vector<std::string> With(std::vector<std::string> extra) {
  std::vector<std::string> a = kRequired;
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

// The settings docs/operations.md documents: the `names` in the first column of the table under
// "| setting | default | meaning |".
std::set<std::string> DocumentedSettings() {
  std::ifstream in(std::string(GLEANER_SOURCE_DIR) + "/docs/operations.md");
  std::set<std::string> names;
  std::string line;
  bool table = false;
  while (std::getline(in, line)) {
    if (line.rfind("| setting |", 0) == 0) {
      table = true;
      continue;
    }
    if (!table || line.rfind("|---", 0) == 0) continue;
    if (line.empty() || line[0] != '|') break;
    const std::string first = line.substr(1, line.find('|', 1) - 1);
    for (size_t a = first.find('`'); a != std::string::npos; a = first.find('`', a + 1)) {
      size_t b = first.find('`', a + 1);
      if (b == std::string::npos) break;
      names.insert(first.substr(a + 1, b - a - 1));
      a = b;
    }
  }
  return names;
}

// The settings --help lists: the "  --name" lines after "options:".
std::set<std::string> UsageSettings(const std::string& usage) {
  std::set<std::string> names;
  std::istringstream in(usage.substr(usage.find("options:")));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("  --", 0) != 0) continue;
    names.insert(line.substr(4, line.find_first_of(" =", 4) - 4));
  }
  return names;
}

}  // namespace

TEST_CASE("defaults and derived values", "[options]") {
  World w;
  auto o = w.Parse(kRequired);
  REQUIRE(o.ok());
  CHECK(o->db == "x.db");
  CHECK(o->listen_host == "127.0.0.1");
  CHECK(o->listen_port == 8080);
  CHECK(o->core.heartbeat_interval_s == 30);
  CHECK(o->core.stall_after_s == 60);
  CHECK(o->maintenance_period_s == 60);
  CHECK(o->core.public_url == "http://127.0.0.1:8080");
  CHECK_FALSE(o->public_url_set);
  CHECK(o->core.s3.path_style);
  // stall-after follows a changed interval unless set itself.
  o = w.Parse(With({"--heartbeat-interval", "0.25"}));
  REQUIRE(o.ok());
  CHECK(o->core.heartbeat_interval_s == 0.25);
  CHECK(o->core.stall_after_s == 0.5);
}

TEST_CASE("every source: flag > env > config file > default", "[options]") {
  World w;
  w.files["c.conf"] =
      "# comment\n\nheartbeat-interval = 10\nstall-after=100  # trailing comment\n"
      "min-nodes = 2\nmax-nodes = 9\ns3-virtual-hosted = true\nlisten = 0.0.0.0:9000\n"
      "insecure-http = on\n";
  w.env["GLEANER_CONFIG"] = "c.conf";
  w.env["GLEANER_STALL_AFTER"] = "50";
  w.env["GLEANER_MAX_NODES"] = "7";
  w.env["AWS_ACCESS_KEY_ID"] = "AKID";
  w.env["AWS_SECRET_ACCESS_KEY"] = "SECRET";
  auto o = w.Parse(With({"--max-nodes=5", "--public-url", "https://c.example/", "--s3-endpoint",
                         "http://127.0.0.1:4568", "--s3-bucket", "b"}));
  INFO(o.status().ToString());
  REQUIRE(o.ok());
  CHECK(o->core.heartbeat_interval_s == 10);  // file
  CHECK(o->core.stall_after_s == 50);         // env over file
  CHECK(o->core.autoscale_min == 2);          // file
  CHECK(o->core.autoscale_max == 5);          // flag over env over file
  CHECK(o->listen_host == "0.0.0.0");
  CHECK(o->listen_port == 9000);
  CHECK(o->core.public_url == "https://c.example");
  CHECK(o->public_url_set);
  CHECK_FALSE(o->core.s3.path_style);
  CHECK(o->core.s3.endpoint == "http://127.0.0.1:4568");
  CHECK(o->core.s3.bucket == "b");
  CHECK(o->core.s3.access_key_id == "AKID");
  CHECK(o->core.s3.secret_access_key == "SECRET");
  // --config on the command line wins over GLEANER_CONFIG.
  w.files["d.conf"] = "heartbeat-interval = 4\n";
  o = w.Parse(With({"--config", "d.conf"}));
  REQUIRE(o.ok());
  CHECK(o->core.heartbeat_interval_s == 4);
}

TEST_CASE("boolean flags without a value mean true", "[options]") {
  World w;
  auto o = w.Parse(With({"--s3-virtual-hosted", "--threads", "8"}));
  REQUIRE(o.ok());
  CHECK_FALSE(o->core.s3.path_style);
  CHECK(o->threads == 8);
  o = w.Parse(With({"--s3-virtual-hosted", "false"}));
  REQUIRE(o.ok());
  CHECK(o->core.s3.path_style);
}

TEST_CASE("bad input is one clear error naming the setting", "[options]") {
  World w;
  w.files["bad.conf"] = "heartbeat-interval = 10\nnonsense\n";
  w.files["unknown.conf"] = "frobs = 1\n";
  struct Case {
    std::vector<std::string> args;
    std::string expect;
  };
  std::vector<Case> cases = {
      {{"--data-dir", "d"}, "--db is required"},
      {{"--db", "x"}, "--data-dir is required"},
      {With({"--nope"}), "unknown flag --nope"},
      {With({"positional"}), "unexpected argument"},
      {With({"--heartbeat-interval"}), "needs a value"},
      {With({"--heartbeat-interval", "soon"}),
       "--heartbeat-interval: expected a non-negative number"},
      {With({"--heartbeat-interval", "-1"}), "--heartbeat-interval"},
      {With({"--heartbeat-interval", "nan"}), "--heartbeat-interval"},
      {With({"--min-nodes", "1.5"}), "--min-nodes: expected a non-negative integer"},
      {With({"--listen", "localhost"}), "--listen: expected HOST:PORT"},
      {With({"--listen", "h:70000"}), "port must be in"},
      {With({"--maintenance-period", "0"}), "--maintenance-period"},
      {With({"--threads", "0"}), "--threads"},
      {With({"--log-level", "loud"}), "--log-level"},
      {With({"--s3-virtual-hosted=maybe"}), "true or false"},
      {With({"--config", "missing.conf"}), "cannot read config file missing.conf"},
      {With({"--config", "bad.conf"}), "bad.conf:2"},
      {With({"--config", "unknown.conf"}), "unknown setting 'frobs'"},
  };
  for (const Case& c : cases) {
    auto o = w.Parse(c.args);
    REQUIRE_FALSE(o.ok());
    INFO(o.status().message());
    CHECK(o.status().code() == Code::kInvalidArgument);
    CHECK(o.status().message().find(c.expect) != std::string::npos);
    CHECK(o.status().message().find('\n') == std::string::npos);
  }
  w.env["GLEANER_HEARTBEAT_INTERVAL"] = "x";
  auto o = w.Parse(kRequired);
  REQUIRE_FALSE(o.ok());
  CHECK(o.status().message().find("GLEANER_HEARTBEAT_INTERVAL") != std::string::npos);
}

TEST_CASE("usage and the operator manual list the same settings, and the parser knows each",
          "[options]") {
  // The manual's settings table is written by hand, apart from the table usage and the parser
  // are built from: a setting added to one and not the other fails here.
  const std::set<std::string> documented = DocumentedSettings();
  REQUIRE(documented.size() >= 40);
  const std::set<std::string> listed = UsageSettings(ServeUsage());
  for (const std::string& name : documented) {
    INFO("documented in docs/operations.md: " << name);
    CHECK(listed.count(name) == 1);
  }
  for (const std::string& name : listed) {
    INFO("listed by --help: " << name);
    CHECK(documented.count(name) == 1);
  }
  World w;
  for (const std::string& name : documented) {
    // Accepted, or refused for its value; never an unknown flag.
    auto o = w.Parse(With({"--" + name + "=1"}));
    INFO(name << ": " << (o.ok() ? "ok" : o.status().message()));
    CHECK((o.ok() || o.status().message().find("unknown flag") == std::string::npos));
  }
}

TEST_CASE("rate limits and job limits from flags, environment and config file", "[options]") {
  World w;
  auto o = w.Parse(kRequired);
  REQUIRE(o.ok());
  CHECK(o->core.node_rate.per_second == 2);
  CHECK(o->core.node_rate.burst == 60);
  CHECK(o->core.max_active_jobs == 100);
  w.env["GLEANER_NODE_RATE_LIMIT"] = "off";
  w.env["GLEANER_DEVELOPER_RATE_LIMIT"] = "1:5";
  w.files["g.conf"] = "operator-rate-limit = 0.5:10\nmax-active-jobs = 7\n";
  o = w.Parse(
      With({"--config", "g.conf", "--developer-rate-limit", "3:30", "--max-spec-bytes", "2048"}));
  REQUIRE(o.ok());
  CHECK_FALSE(o->core.node_rate.limited());
  CHECK(o->core.developer_rate.per_second == 3);
  CHECK(o->core.developer_rate.burst == 30);
  CHECK(o->core.operator_rate.per_second == 0.5);
  CHECK(o->core.max_active_jobs == 7);
  CHECK(o->core.max_spec_bytes == 2048);
  auto bad = w.Parse(With({"--enroll-rate-limit", "fast"}));
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("enroll-rate-limit") != std::string::npos);
}
