// lora-sd jobs (SD-style and SDXL-shaped) end to end through the real coordinator and agents, on
// CPU: model and dataset made by gleaner-train, uploaded, trained across a SIGTERM of the first
// agent (checkpoint, commit, release, resume on a second agent), result downloaded and compared
// byte for byte with an uninterrupted local run of the same spec.
#include <signal.h>

#include <memory>
#include <optional>
#include <set>

#include "shared/sha256.h"
#include "tests/integration/agent_fleet.h"
#include "tests/integration/coordinator_fixture.h"
#include "tests/integration/harness.h"
#include "train_test_util.h"  // Catch2, via the CHECK fix-up

namespace h = gleaner::testing;
using namespace gleaner;
using namespace gleaner::train::testing;

namespace {

int RunTrain(const std::vector<std::string>& args, const std::string& log) {
  h::ProcessSpec spec;
  spec.binary = "gleaner-train";
  spec.args = args;
  spec.stderr_path = log;
  h::Process p(spec);
  std::string error;
  if (!p.Start(&error)) FAIL(error);
  std::optional<h::ExitStatus> st = p.Wait(h::Millis(120000));
  if (!st) {
    p.Kill();
    return -1;
  }
  return st->exited ? st->code : -st->signal;
}

// POST /v1/uploads + PUT; returns {"uri", "sha256"}.
Json Upload(h::HttpClient& dev, const std::string& path) {
  Result<std::string> bytes = ReadFile(path);
  REQUIRE(bytes.ok());
  std::string sha = Sha256Hex(*bytes);
  std::string name = path.substr(path.rfind('/') + 1);
  h::HttpResult r = dev.Post(
      "/v1/uploads", Json{{"name", name}, {"size", int64_t(bytes->size())}, {"sha256", sha}});
  INFO(r.Describe());
  REQUIRE(r.status == 201);
  Json j = r.json();
  h::HttpResult put = h::HttpClient::Fetch("PUT", j["url"].get<std::string>(), *bytes);
  INFO(put.Describe());
  REQUIRE(put.status / 100 == 2);
  return Json{{"uri", j["uri"]}, {"sha256", sha}};
}

// A tiny lora-sd job (SD-style, or SDXL-shaped: text_time config, pooled text embeddings and
// time_ids in the dataset) submitted to a real coordinator: model and dataset made by
// gleaner-train and uploaded.
struct TinyLoraJob {
  TempDir tmp;
  Json config, params;
  std::unique_ptr<h::CoordinatorProcess> coord;
  std::optional<h::HttpClient> dev;
  std::string enroll, id;

  TinyLoraJob(bool sdxl, int64_t steps, int64_t checkpoint_every,
              std::vector<std::string> coordinator_args = {}) {
    std::vector<std::string> model_args = {"make-model", "--out", tmp / "weights.safetensors",
                                           "--seed", "1"};
    std::vector<std::string> data_args = {
        "make-dataset", "--out", tmp / "data.safetensors", "--n", "8", "--size", "8"};
    if (sdxl) {
      model_args.push_back("--sdxl");
      data_args.push_back("--sdxl");
    }
    REQUIRE(RunTrain(model_args, tmp / "make.log") == 0);
    REQUIRE(RunTrain(data_args, tmp / "make.log") == 0);
    Result<std::string> cfg_text = ReadFile(tmp / "config.json");
    REQUIRE(cfg_text.ok());
    config = *ParseJson(*cfg_text);

    h::CoordinatorOptions o;
    o.heartbeat_interval_s = 0.2;
    o.extra_args = {"--retry-after", "0.1"};
    o.extra_args.insert(o.extra_args.end(), coordinator_args.begin(), coordinator_args.end());
    coord = std::make_unique<h::CoordinatorProcess>(tmp.path(), o);
    std::string error;
    REQUIRE(coord->Start(&error));
    std::optional<std::string> dev_token = h::CreateKey(*coord, "developer", &error);
    std::optional<std::string> enroll_token = h::CreateKey(*coord, "enroll", &error);
    REQUIRE(dev_token);
    REQUIRE(enroll_token);
    enroll = *enroll_token;
    dev.emplace(coord->Client(*dev_token));

    Json model = Upload(*dev, tmp / "weights.safetensors");
    model["config"] = config;
    Json dataset = Upload(*dev, tmp / "data.safetensors");
    params = {{"steps", steps},
              {"batch_size", 2},
              {"checkpoint_every", checkpoint_every},
              {"learning_rate", 0.003},
              {"seed", 5}};
    h::HttpResult sub = dev->Post(
        "/v1/jobs",
        Json{{"kind", "lora-sd"}, {"params", params}, {"model", model}, {"dataset", dataset}});
    INFO(sub.Describe());
    REQUIRE(sub.status == 201);
    id = sub.json()["id"].get<std::string>();
  }
  Json Job() { return dev->Get("/v1/jobs/" + id).json(); }

  // The completed job's output files, by name.
  std::map<std::string, std::string> Outputs() {
    h::HttpResult res = dev->Get("/v1/jobs/" + id + "/result");
    INFO(res.Describe());
    REQUIRE(res.status == 200);
    std::map<std::string, std::string> got;
    const Json result = res.json();  // held: a range over a temporary's member dangles
    for (const Json& out : result["outputs"]) {
      got[out["name"].get<std::string>()] =
          h::HttpClient::Fetch("GET", out["url"].get<std::string>()).body;
    }
    REQUIRE(got.count("lora.safetensors"));
    REQUIRE(got.count("lora_peft.safetensors"));
    return got;
  }

  // The job run locally, uninterrupted, by the honest trainer: got must hold the same bytes.
  void CheckHonestOutputs(std::map<std::string, std::string>& got) {
    Json spec = {
        {"job_id", id},
        {"kind", "lora-sd"},
        {"steps", params["steps"]},
        {"params", params},
        {"inputs", {{"model", tmp / "weights.safetensors"}, {"dataset", tmp / "data.safetensors"}}},
        {"model", {{"config", config}}}};
    REQUIRE(WriteFileDurable(tmp / "SPEC.json", spec.dump()).ok());
    REQUIRE(RunTrain({"run", "--spec", tmp / "SPEC.json", "--work-dir", tmp / "local"},
                     tmp / "local.log") == 0);
    for (const char* f : {"lora.safetensors", "lora_peft.safetensors"}) {
      INFO(f);
      Result<std::string> local = ReadFile(tmp / ("local/output/" + std::string(f)));
      REQUIRE(local.ok());
      CHECK((got[f] == *local));
    }
  }
};

// The whole story for one tiny job.
void RunEndToEnd(bool sdxl, int64_t steps) {
  TinyLoraJob t(sdxl, steps, 20);
  TempDir& tmp = t.tmp;
  h::CoordinatorProcess& coord = *t.coord;
  const std::string* enroll = &t.enroll;
  std::string error;
  auto job = [&] { return t.Job(); };

  h::AgentProcess a(tmp.path(), "agent-a", coord.url(), *enroll);
  REQUIRE(a.Start(&error));
  bool mid = h::WaitUntil(
      [&] {
        Json j = job();
        return j.value("state", "") == "running" && j["step"].is_number() &&
               j["step"].get<int64_t>() >= steps / 4;
      },
      h::Millis(90000), h::Millis(50));
  INFO(a.Log());
  REQUIRE(mid);
  a.process().Signal(SIGTERM);
  std::optional<h::ExitStatus> st = a.process().Wait(h::Millis(30000));
  REQUIRE(st);
  CHECK(st->clean());
  Json after = job();
  CHECK(after.value("state", "") == "pending");
  CHECK(after["step"].get<int64_t>() < steps);

  h::AgentProcess b(tmp.path(), "agent-b", coord.url(), *enroll);
  REQUIRE(b.Start(&error));
  bool done = h::WaitUntil([&] { return job().value("state", "") == "completed"; },
                           h::Millis(120000), h::Millis(50));
  INFO(b.Log());
  REQUIRE(done);
  CHECK(b.Log().find("resum") != std::string::npos);

  std::map<std::string, std::string> got = t.Outputs();
  // The same job run locally without interruption gives the same bytes.
  t.CheckHonestOutputs(got);
  if (sdxl) {  // the kohya file has sd-scripts' SDXL key names
    CHECK(got["lora.safetensors"].find("lora_unet_input_blocks_3_1_transformer_blocks_0_attn1") !=
          std::string::npos);
  }
}

}  // namespace

TEST_CASE("lora-sd job end to end through coordinator and agents across a SIGTERM",
          "[lora_sd][e2e]") {
  RunEndToEnd(/*sdxl=*/false, 120);
}

TEST_CASE("SDXL-shaped lora-sd job end to end through coordinator and agents across a SIGTERM",
          "[lora_sd][sdxl][e2e]") {
  RunEndToEnd(/*sdxl=*/true, 80);
}

// Verified training on CPU (docs/architecture.md "Verified training"): agents started with
// --verify replay each other's committed segments with gleaner-train --stop-at-step; lora-sd on
// CPU is exact, so every replay must hash to the trainer's checkpoint.
TEST_CASE("lora-sd: agents with --verify replay each other's segments and agree on every one",
          "[lora_sd][e2e][verification]") {
  TinyLoraJob t(/*sdxl=*/false, 24, 8, {"--verify-fraction", "1"});
  std::string error;
  h::AgentProcess a(t.tmp.path(), "agent-a", t.coord->url(), t.enroll, {}, {"--verify"});
  h::AgentProcess b(t.tmp.path(), "agent-b", t.coord->url(), t.enroll, {}, {"--verify"});
  REQUIRE(a.Start(&error));
  REQUIRE(b.Start(&error));
  const bool settled = h::WaitUntil(
      [&] {
        Json j = t.Job();
        return j.value("state", "") == "completed" && j["verification"]["open"] == 0;
      },
      h::Millis(180000), h::Millis(100));
  INFO(a.Log());
  INFO(b.Log());
  REQUIRE(settled);
  Json e = t.dev->Get("/v1/jobs/" + t.id + "/events").json();
  REQUIRE(e["verifications"].size() >= 1);
  for (const Json& v : e["verifications"]) {
    INFO(DumpJson(v));
    CHECK(v["verdict"] == "agree");
    CHECK(v["node_id"] != v["trainer_node"]);
  }
  CHECK(e["job"]["verification"]["rejected"] == 0);
}

// A forging trainer for lora-sd (TEST ONLY): gleaner-agent with --trainer pointing at a script
// that trains every lora-sd job with another seed (a LoRA the job did not ask for, trained for
// real) and passes everything else (the agent's self-test) to the honest trainer.
TEST_CASE("lora-sd: a trainer that forges its LoRA is caught by --verify agents",
          "[lora_sd][e2e][verification]") {
  TinyLoraJob t(/*sdxl=*/false, 24, 8, {"--verify-fraction", "1"});
  const std::string forging = t.tmp / "forging-trainer.sh";
  REQUIRE(WriteFileDurable(forging,
                           "#!/bin/bash\n"
                           "args=()\n"
                           "while [ $# -gt 0 ]; do\n"
                           "  if [ \"$1\" = --spec ] && [[ \"$2\" == */forger/* ]] &&\n"
                           "     grep -q '\"lora-sd\"' \"$2\"; then\n"
                           "    sed -E 's/\"seed\":5([,}])/\"seed\":6\\1/' \"$2\" > \"$2.forged\"\n"
                           "    args+=(--spec \"$2.forged\"); shift 2; continue\n"
                           "  fi\n"
                           "  args+=(\"$1\"); shift\n"
                           "done\n"
                           "exec " GLEANER_BIN_DIR "/gleaner-train \"${args[@]}\"\n")
              .ok());
  REQUIRE(::chmod(forging.c_str(), 0755) == 0);
  std::string error;
  // The forger trains the whole job alone first. Every agent runs the same trainer script (one
  // reproducibility class: the trainer build is the script's digest); it forges only for the
  // agent whose state dir is forger/ (the spec is written there).
  h::AgentProcess forger(t.tmp.path(), "forger", t.coord->url(), t.enroll, {},
                         {"--trainer", forging});
  REQUIRE(forger.Start(&error));
  // Its last segment is always replayed: the job waits in 'verifying' and the forged outputs
  // are never released.
  const bool forged = h::WaitUntil([&] { return t.Job().value("state", "") == "verifying"; },
                                   h::Millis(120000), h::Millis(100));
  INFO(forger.Log());
  REQUIRE(forged);
  CHECK(t.dev->Get("/v1/jobs/" + t.id + "/result").status == 409);
  std::string forged_sha;
  auto find_forged = [&] {
    const Json events = t.dev->Get("/v1/jobs/" + t.id + "/events").json();
    for (const Json& c : events["checkpoints"]) {
      if (!c["outputs"].is_array()) continue;
      for (const Json& o : c["outputs"]) {
        if (o["name"] == "lora.safetensors") forged_sha = o["sha256"];
      }
    }
    return !forged_sha.empty();
  };
  REQUIRE(h::WaitUntil(find_forged, h::Millis(10000), h::Millis(50)));

  // Honest verifiers replay its segments: the first disagrees, the second agrees with the first,
  // the forger is quarantined and the job rewound; the honest agents train it again.
  h::AgentProcess a(t.tmp.path(), "agent-a", t.coord->url(), t.enroll, {},
                    {"--verify", "--trainer", forging});
  h::AgentProcess b(t.tmp.path(), "agent-b", t.coord->url(), t.enroll, {},
                    {"--verify", "--trainer", forging});
  REQUIRE(a.Start(&error));
  REQUIRE(b.Start(&error));
  std::map<std::string, std::string> states;
  const bool settled = h::WaitUntil(
      [&] {
        Json j = t.Job();
        if (j.value("state", "") != "completed" || j["verification"]["open"] != 0) return false;
        states = h::NodeStates(*t.coord);
        return states[forger.NodeId()] == "quarantined";
      },
      h::Millis(240000), h::Millis(100));
  INFO(a.Log());
  INFO(b.Log());
  INFO(DumpJson(t.dev->Get("/v1/jobs/" + t.id + "/events").json()));
  REQUIRE(settled);
  CHECK(states[a.NodeId()] == "active");
  CHECK(states[b.NodeId()] == "active");
  int trainer_bad = 0;
  const Json events = t.dev->Get("/v1/jobs/" + t.id + "/events").json();
  for (const Json& v : events["verifications"]) {
    if (v["verdict"] == "trainer_bad") ++trainer_bad;
  }
  CHECK(trainer_bad >= 1);
  std::map<std::string, std::string> got = t.Outputs();
  CHECK(Sha256Hex(got["lora.safetensors"]) != forged_sha);
  t.CheckHonestOutputs(got);
}
