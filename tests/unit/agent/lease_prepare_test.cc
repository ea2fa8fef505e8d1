// The lease's preparation (lease_prepare.h): the spec the trainer gets from a claim, with the
// model format the claim names, and a format this agent does not know failing the lease as the
// node's fault before anything is fetched (job_runner.h RunJob against a fake coordinator).
#include "agent/supervisor/lease_prepare.h"

#include <catch2/catch.hpp>
#include <mutex>

#include "agent/supervisor/cache.h"
#include "agent/supervisor/job_runner.h"
#include "agent/supervisor/state.h"
#include "fake_http.h"
#include "shared/model_manifest.h"
#include "test_util.h"

using namespace gleaner;
using namespace gleaner::agent;
using gleaner::testing::FakeHttp;
using gleaner::testing::Reply;
using gleaner::testing::TempDir;

namespace {

const std::string kSha(64, 'a');

// A claim of a lora-sd job whose inputs.model is `model` (its JSON text).
Assignment Claim(const std::string& model, const std::string& extra = "") {
  Result<Json> j = ParseJson(
      R"({"job":{"id":"j_1","kind":"lora-sd","params":{"steps":8,"rank":4},"steps":8,
      "model":{"config":{"sample_size":8}}},"lease":{"epoch":2,"heartbeat_interval":30},
      "inputs":{"model":)" +
      model + R"(,"dataset":{"url":"http://store/d","sha256":")" + kSha + R"(","size":1}})" +
      extra + "}");
  REQUIRE(j.ok());
  Result<Assignment> a = ParseAssignment(*j);
  REQUIRE(a.ok());
  return *a;
}

std::string File(const std::string& format) {
  std::string f = R"({"url":"http://store/m","sha256":")" + kSha + R"(","size":3)";
  return f + (format.empty() ? "" : R"(,"format":")" + format + "\"") + "}";
}

}  // namespace

TEST_CASE("the lease's spec names the model format the claim gave, steps once", "[lease]") {
  TempDir t;
  for (const char* format : {"", "unet-safetensors"}) {  // "": a coordinator without the field
    INFO(format);
    Assignment job = Claim(File(format));
    REQUIRE(CheckModelFormat(job).ok());
    const TrainerSpec spec =
        SpecFor(job, {{"dataset", "/c/d", ""}, {"model", "/c/m", job.inputs[1].format}}, "");
    Result<std::string> path = WriteSpec(spec, t.path());
    REQUIRE(path.ok());
    Result<std::string> text = files::ReadAll(*path, 1 << 20);
    REQUIRE(text.ok());
    Result<TrainerSpec> back = TrainerSpec::Parse(*text);
    REQUIRE(back.ok());
    CHECK(back->ModelFormat() == kModelFormatUnetSafetensors);
    CHECK(back->model_config == Json{{"sample_size", 8}});
    CHECK(back->steps == 8);
    CHECK(back->epoch == 2);
    CHECK(back->params["rank"] == 4);
    CHECK(back->stop_at_step == 0);
    CHECK(back->resume_dir.empty());
    // The JSON as trainers read it today: model.format beside model.config.
    Result<Json> j = ParseJson(*text);
    CHECK((*j)["model"]["format"] == "unet-safetensors");
    CHECK((*j)["inputs"]["model"] == "/c/m");
  }
  // A replay resumed from a checkpoint: both reach the spec (and its command line).
  Assignment replay = Claim(File("diffusers"), R"(,"resume":{"step":2,"url":"http://store/c",
      "sha256":")" + kSha + R"(","size":5},"verification":{"id":"v_1","stop_step":6})");
  TrainerSpec spec = SpecFor(replay, {{"model", "/w/inputs/model", "diffusers"}}, "/w/resume");
  REQUIRE(spec.Validate().ok());
  CHECK(spec.resume_step == 2);
  CHECK(spec.stop_at_step == 6);
  CHECK(spec.ToJson()["model"]["format"] == "diffusers");
  // A claim the trainer would refuse (no steps anywhere) is the job's input, named.
  Assignment no_steps = Claim(File(""));
  no_steps.steps = 0;
  no_steps.params = Json::object();
  Result<std::string> refused = WriteSpec(SpecFor(no_steps, {}, ""), t.path());
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().code() == Code::kInvalidArgument);
  CHECK(refused.status().message() == "spec.steps must be an integer in [1, 1099511627776]");
}

TEST_CASE("an unknown model format fails the lease as the node's fault, nothing fetched",
          "[lease]") {
  Assignment job = Claim(File("flux-single-file"));
  CHECK(CheckModelFormat(job).message() ==
        "model format 'flux-single-file' is not supported by this agent (diffusers, "
        "unet-safetensors)");

  TempDir t;
  StateDir state(t / "state");
  REQUIRE(state.Init().ok());
  BlobCache cache(state.CacheDir(), int64_t(1) << 30);
  std::mutex mu;
  std::vector<Json> fails;
  int downloads = 0;
  FakeHttp http([&](const net::HttpCall& c) -> Result<net::HttpResponse> {
    std::lock_guard<std::mutex> lock(mu);
    if (c.url.find("/fail") != std::string::npos) {
      fails.push_back(*ParseJson(c.body));
      return Reply(200, R"({"job_id":"j_1","state":"pending","failures":1,"cause":"node"})");
    }
    if (c.url.find("http://store/") == 0) ++downloads;
    return Reply(200, "{}");
  });
  CoordinatorApi api(&http, "http://coordinator");
  AgentConfig config;
  config.trainer = t / "no-such-trainer";
  ShutdownState shutdown;
  CHECK(RunJob(config, &api, &state, &cache, job, &shutdown) == JobOutcome::kFailed);
  std::lock_guard<std::mutex> lock(mu);
  CHECK(downloads == 0);
  REQUIRE(fails.size() == 1);
  CHECK(fails[0]["cause"] == "node");
  CHECK(fails[0]["epoch"] == 2);
  CHECK(fails[0]["reason"] ==
        "model format 'flux-single-file' is not supported by this agent (diffusers, "
        "unet-safetensors)");
  Result<std::optional<CurrentJob>> left = state.LoadCurrentJob();
  REQUIRE(left.ok());
  CHECK_FALSE(left->has_value());
}
