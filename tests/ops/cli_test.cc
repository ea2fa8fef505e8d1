// Black-box tests of the gleaner CLI against a real coordinator and a real agent.
#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <map>

#include "agent/train/images/decode.h"
#include "shared/sha256.h"
#include "tests/integration/agent_fleet.h"

using namespace gleaner;
using namespace gleaner::testing;

namespace {

class Cli {
 public:
  Cli(const TempDir& dir, std::string url) : dir_(dir), url_(std::move(url)) {}
  ToolRun Run(const std::string& token, std::vector<std::string> args,
              std::vector<std::pair<std::string, std::string>> env = {}) {
    ProcessSpec spec;
    spec.binary = "gleaner";
    spec.args = std::move(args);
    spec.env = std::move(env);
    spec.env.emplace_back("GLEANER_URL", url_);
    spec.env.emplace_back("GLEANER_TOKEN", token);
    ToolRun r = RunTool(dir_, std::move(spec));
    REQUIRE(r.code >= 0);
    return r;
  }

 private:
  const TempDir& dir_;
  std::string url_;
};

std::string Line(const std::string& s) {
  return s.substr(0, s.find('\n'));
}

int Lines(const std::string& s) {
  return int(std::count(s.begin(), s.end(), '\n'));
}

}  // namespace

TEST_CASE("gleaner CLI: upload, submit --wait, status, logs, download, report, nodes, keys",
          "[cli]") {
  TempDir dir("gleaner-cli");
  Fleet fleet(dir.path());
  REQUIRE(fleet.ok());
  std::string error;
  AgentProcess& agent = fleet.AddAgent("a");
  REQUIRE(agent.Start(&error));
  const std::string op = fleet.coordinator().options().operator_token;
  Cli cli(dir, fleet.coordinator().url());

  ToolRun key = cli.Run(op, {"keys", "create", "--role", "developer", "--name", "alice"});
  REQUIRE(key.code == 0);
  std::string dev = Line(key.out);
  CHECK(dev.rfind("glt_", 0) == 0);

  std::string data(300000, 'x');
  for (size_t i = 0; i < data.size(); ++i) data[i] = char('a' + (i * 7919) % 26);
  REQUIRE(WriteFile(dir.File("data.bin"), data));
  ToolRun up = cli.Run(dev, {"upload", dir.File("data.bin"), "--json"});
  INFO(up.err);
  REQUIRE(up.code == 0);
  Json upload = Json::parse(up.out, nullptr, false);
  REQUIRE(upload.is_object());
  CHECK(upload["sha256"] == Sha256Hex(data));
  CHECK(upload["size"] == int64_t(data.size()));
  CHECK(up.err.find("upload data.bin: 100%") != std::string::npos);  // plain lines off a TTY

  Json spec = {{"kind", "synthetic"},
               {"params", {{"steps", 30}, {"step_ms", 5}, {"checkpoint_every", 10}}},
               {"dataset", {{"uri", upload["uri"]}, {"sha256", upload["sha256"]}}}};
  REQUIRE(WriteFile(dir.File("job.json"), spec.dump()));
  ToolRun sub = cli.Run(dev, {"submit", dir.File("job.json"), "--wait", "--poll", "0.1"});
  INFO(sub.err);
  REQUIRE(sub.code == 0);
  std::string id = Line(sub.out).substr(0, Line(sub.out).find(' '));
  CHECK(Line(sub.out) == id + " completed");
  CHECK(sub.err.find("job " + id + ": 100%") != std::string::npos);

  ToolRun st = cli.Run(dev, {"status", id, "--json"});
  REQUIRE(st.code == 0);
  CHECK(Json::parse(st.out, nullptr, false)["state"] == "completed");
  ToolRun st2 = cli.Run(dev, {"status", id});
  CHECK(st2.out.find("state     completed") != std::string::npos);

  ToolRun list = cli.Run(dev, {"list"});
  REQUIRE(list.code == 0);
  CHECK(list.out.rfind("ID ", 0) == 0);
  CHECK(list.out.find(id) != std::string::npos);
  ToolRun list_json = cli.Run(dev, {"list", "--json", "--state", "completed"});
  CHECK(Json::parse(list_json.out, nullptr, false)["jobs"].size() == 1);

  ToolRun logs = cli.Run(dev, {"logs", id});
  REQUIRE(logs.code == 0);
  CHECK(logs.out.find("lease 1  node " + agent.NodeId()) != std::string::npos);
  CHECK(logs.out.find("ended completed") != std::string::npos);
  CHECK(logs.out.find("checkpoint step 10") != std::string::npos);

  ToolRun dl = cli.Run(dev, {"download", id, "-o", dir.File("out")});
  INFO(dl.err);
  REQUIRE(dl.code == 0);
  std::string chain = ReadFile(dir.File("out/chain.txt"));
  CHECK(!chain.empty());
  CHECK(dl.out == Sha256Hex(chain) + "  " + dir.File("out/chain.txt") + "\n");
  CHECK(chain == ExpectedChain(0, 30) + "\n");

  // A stored output that no longer matches its recorded sha256: refused, nothing left behind.
  std::string stored = dir.File("data/blobs/jobs/" + id + "/out/e1/chain.txt");
  REQUIRE(ReadFile(stored) == chain);
  REQUIRE(WriteFile(stored, std::string(chain.size(), 'z')));
  ToolRun bad = cli.Run(dev, {"download", id, "-o", dir.File("out2")});
  CHECK(bad.code == 5);
  // Progress lines, then exactly one error line.
  CHECK(bad.err.find("gleaner: ") == bad.err.rfind("gleaner: "));
  CHECK(bad.err.find("gleaner: chain.txt: sha256/size mismatch") != std::string::npos);
  CHECK(ReadFile(dir.File("out2/chain.txt"), "<none>") == "<none>");
  CHECK(ReadFile(dir.File("out2/chain.txt.part"), "<none>") == "<none>");

  ToolRun rep = cli.Run(op, {"report", "--by", "gpu", "--csv"});
  REQUIRE(rep.code == 0);
  CHECK(rep.out.rfind("group,segments,steps,", 0) == 0);
  CHECK(rep.out.find("\ntotal,1,30,") != std::string::npos);
  ToolRun rep_table = cli.Run(op, {"report"});
  CHECK(rep_table.out.find(id) != std::string::npos);
  ToolRun nodes = cli.Run(op, {"nodes", "--json"});
  REQUIRE(nodes.code == 0);
  CHECK(Json::parse(nodes.out, nullptr, false)["nodes"][0]["jobs_completed"] == 1);
  ToolRun q = cli.Run(op, {"nodes", "quarantine", agent.NodeId(), "--reason", "cli test"});
  CHECK(q.code == 0);
  CHECK(q.out == agent.NodeId() + " quarantined\n");
  // Keys: listed without tokens; a revoked key is refused.
  ToolRun extra = cli.Run(op, {"keys", "create", "--role", "developer", "--name", "mallory"});
  REQUIRE(extra.code == 0);
  const std::string extra_token = Line(extra.out);
  ToolRun keys = cli.Run(op, {"keys", "list", "--json"});
  REQUIRE(keys.code == 0);
  std::string mallory;
  const Json listed = Json::parse(keys.out, nullptr, false);  // outlives the loop below
  for (const Json& k : listed["keys"]) {
    if (k["name"] == "mallory") mallory = k["id"].get<std::string>();
  }
  REQUIRE(!mallory.empty());
  CHECK(keys.out.find(extra_token) == std::string::npos);
  CHECK(cli.Run(op, {"keys", "list"}).out.find("mallory") != std::string::npos);
  ToolRun revoke = cli.Run(op, {"keys", "revoke", mallory});
  CHECK(revoke.code == 0);
  CHECK(revoke.out == mallory + " revoked\n");
  ToolRun refused = cli.Run(extra_token, {"list"});
  CHECK(refused.code == 2);
  CHECK(refused.err.find("401") != std::string::npos);

  // /metrics: the core's gauges and this process's counters, one job claimed and completed.
  HttpResult metrics = fleet.coordinator().OperatorClient().Get("/metrics");
  REQUIRE(metrics.status == 200);
  const std::string& m = metrics.body;
  CHECK(m.find("gleaner_jobs{state=\"completed\"} 1\n") != std::string::npos);
  CHECK(m.find("gleaner_claims_total 1\n") != std::string::npos);
  CHECK(m.find("gleaner_completions_total 1\n") != std::string::npos);
  CHECK(m.find("gleaner_checkpoint_commits_total 0\n") == std::string::npos);
  CHECK(m.find("gleaner_http_request_duration_seconds_count{route=\"/v1/work\",method=\"POST\"}") !=
        std::string::npos);
  CHECK(m.find("route=\"/v1/jobs/{id}/complete\",method=\"POST\",status=\"200\"} 1\n") !=
        std::string::npos);

  // Errors: one line on stderr, documented exit codes.
  ToolRun conflict = cli.Run(dev, {"cancel", id});
  CHECK(conflict.code == 2);
  CHECK(Lines(conflict.err) == 1);
  CHECK(conflict.err.find("409 conflict") != std::string::npos);
  ToolRun missing = cli.Run(dev, {"status", "j_nope"});
  CHECK(missing.code == 2);
  CHECK(missing.err.find("404 not_found") != std::string::npos);
  ToolRun forbidden = cli.Run(dev, {"nodes"});
  CHECK(forbidden.code == 2);
  CHECK(forbidden.err.find("403 forbidden") != std::string::npos);
  ToolRun usage = cli.Run(dev, {"frobnicate"});
  CHECK(usage.code == 1);
  CHECK(Lines(usage.err) == 1);
  CHECK(cli.Run(dev, {"status"}).code == 1);
  CHECK(cli.Run(dev, {"list", "--bogus"}).code == 1);
  ToolRun nofile = cli.Run(dev, {"upload", dir.File("missing.bin")});
  CHECK(nofile.code == 5);
  CHECK(Lines(nofile.err) == 1);
  ToolRun net = cli.Run(dev, {"list", "--url", "http://127.0.0.1:1"});
  CHECK(net.code == 3);
  CHECK(Lines(net.err) == 1);
}

TEST_CASE("gleaner submit --wait exits 4 when the job fails", "[cli]") {
  TempDir dir("gleaner-cli-fail");
  Fleet fleet(dir.path());
  REQUIRE(fleet.ok());
  std::string error;
  // fail_at_step is an input error: one node reports it, a node of another machine confirms it.
  REQUIRE(fleet.AddAgent("a").Start(&error));
  REQUIRE(fleet.AddAgent("b").Start(&error));
  Cli cli(dir, fleet.coordinator().url());
  const std::string op = fleet.coordinator().options().operator_token;
  Json spec = {{"kind", "synthetic"},
               {"max_failures", 1},
               {"params", {{"steps", 20}, {"checkpoint_every", 5}, {"fail_at_step", 3}}}};
  REQUIRE(WriteFile(dir.File("job.json"), spec.dump()));
  ToolRun r = cli.Run(op, {"submit", dir.File("job.json"), "--wait", "--poll", "0.1", "--json"});
  CHECK(r.code == 4);
  CHECK(Json::parse(r.out, nullptr, false)["state"] == "failed");
  CHECK(r.err.find("gleaner: job ") != std::string::npos);
  CHECK(r.err.find(" failed") != std::string::npos);
}

namespace {

Json SampleJob(int64_t sample_ms) {
  return {{"steps", 24},
          {"step_ms", 20},
          {"checkpoint_every", 6},
          {"seed", 5},
          {"sample_ms", sample_ms},
          {"sample_prompts",
           Json::array({"a red fox", {{"prompt", "a blue jay"}, {"negative_prompt", "blurry"}}})},
          {"sample_every", 8},
          {"sample_resolution", 32}};
}

}  // namespace

TEST_CASE(
    "samples end to end: agent SIGTERMed while sampling, resumed, and the CLI downloads "
    "byte-identical real PNGs",
    "[cli][samples]") {
  TempDir dir("gleaner-samples");
  Fleet fleet(dir.path());
  REQUIRE(fleet.ok());
  const std::string op = fleet.coordinator().options().operator_token;
  Cli cli(dir, fleet.coordinator().url());
  const std::string interrupted = fleet.Submit(SampleJob(400));
  REQUIRE(!interrupted.empty());
  std::string error;
  AgentProcess& agent = fleet.AddAgent("a");
  REQUIRE(agent.Start(&error));
  // Checkpoint 16 is durable: the trainer now renders step 16's images (2 x 400 ms).
  const std::string rendering =
      dir.path() + "/a/jobs/" + interrupted + "-e1/checkpoints/0000000016";
  INFO(agent.Log());
  REQUIRE(
      WaitUntil([&] { return access(rendering.c_str(), F_OK) == 0; }, Millis(30000), Millis(5)));
  agent.process().Signal(SIGTERM);
  auto exit = agent.process().Wait(Millis(15000));
  REQUIRE(exit.has_value());
  CHECK(exit->clean());
  // The checkpoint the sampling followed is committed; step 16 has no samples yet.
  Json job = fleet.Job(interrupted);
  INFO(job.dump());
  CHECK(job["state"] == "pending");
  CHECK(job["latest_checkpoint"]["step"] == 16);
  CHECK(job["latest_sample_step"] == 8);

  // Resumed (the same agent, started again): step 16's samples are rendered again.
  REQUIRE(agent.Start(&error));
  const std::string plain = fleet.Submit(SampleJob(0));
  REQUIRE(!plain.empty());
  REQUIRE(fleet.WaitAllFinal({interrupted, plain}, Millis(60000)));
  CHECK(fleet.Job(interrupted)["state"] == "completed");
  CHECK(fleet.Job(plain)["state"] == "completed");
  CHECK(fleet.Job(interrupted)["sampling_s"].get<double>() > 0.8);  // 2 x 400 ms at least

  std::map<std::string, std::string> first;
  for (const std::string& id : {interrupted, plain}) {
    const std::string out = dir.File("samples-" + id);
    ToolRun r = cli.Run(fleet.developer_token(), {"jobs", "samples", id, "--out", out});
    INFO(r.err);
    REQUIRE(r.code == 0);
    CHECK(Lines(r.out) == 6);  // steps 8, 16, 24 x 2 prompts
    for (int step : {8, 16, 24}) {
      for (int i = 0; i < 2; ++i) {
        const std::string name = std::to_string(step) + "/" + std::to_string(i) + ".png";
        const std::string png = ReadFile(out + "/" + name);
        auto img = images::DecodeImage(png);
        INFO(name);
        REQUIRE(img.ok());
        CHECK(img->width == 32);
        CHECK(img->height == 32);
        if (first.count(name)) {
          CHECK(png == first[name]);  // re-run and resumed: the same bytes
        } else {
          first[name] = png;
        }
      }
    }
    auto listing = ParseJson(ReadFile(out + "/samples.json"));
    REQUIRE(listing.ok());
    CHECK((*listing)["images"] == 6);
    CHECK((*listing)["steps"][0]["step"] == 24);
    CHECK((*listing)["steps"][0]["images"][1]["negative_prompt"] == "blurry");
  }
  // The final samples are part of the result; another developer sees nothing.
  Json result = fleet.coordinator()
                    .Client(fleet.developer_token())
                    .Get("/v1/jobs/" + plain + "/result")
                    .json();
  CHECK(result["samples"]["step"] == 24);
  ToolRun key = cli.Run(op, {"keys", "create", "--role", "developer"});
  REQUIRE(key.code == 0);
  ToolRun other = cli.Run(Line(key.out), {"jobs", "samples", plain, "--out", dir.File("x")});
  CHECK(other.code == 2);
  CHECK(other.err.find("no such job") != std::string::npos);
  CHECK(cli.Run(op, {"jobs", "samples"}).code == 1);
  // Sampling time in the cost report (operator).
  ToolRun cost = cli.Run(op, {"report", "--by", "job", "--json"});
  REQUIRE(cost.code == 0);
  auto report = ParseJson(cost.out);
  REQUIRE(report.ok());
  CHECK((*report)["totals"]["sampling_seconds"].get<double>() > 0);
}
