// agent/protocol/trainer_spec.h: SPEC.json, round trip and every field's error.
#include "agent/protocol/trainer_spec.h"

#include <catch2/catch.hpp>

#include "shared/model_manifest.h"

using namespace gleaner;

namespace {

// A replay of a diffusers job: every field set.
TrainerSpec Full() {
  TrainerSpec s;
  s.job_id = "j_1";
  s.kind = "lora-sd";
  s.params = {{"steps", 10}, {"rank", 4}, {"sample_prompts", {"a dog"}}};
  s.steps = 10;
  s.epoch = 3;
  s.inputs = {{"dataset", "/w/cache/abc", ""}, {"model", "/w/inputs/model", kModelFormatDiffusers}};
  s.model_config = {{"sample_size", 64}};
  s.resume_dir = "/w/resume";
  s.resume_step = 4;
  s.stop_at_step = 8;
  return s;
}

// The JSON of Full() with one change.
std::string With(const std::string& pointer, const Json& value) {
  Json j = Full().ToJson();
  j[Json::json_pointer(pointer)] = value;
  return DumpJson(j);
}
std::string Without(const std::string& key) {
  Json j = Full().ToJson();
  j.erase(key);
  return DumpJson(j);
}

std::string ErrorOf(const std::string& text) {
  Result<TrainerSpec> r = TrainerSpec::Parse(text);
  if (r.ok()) return "(parsed)";
  CHECK(r.status().code() == Code::kInvalidArgument);
  return r.status().message();
}

bool Mentions(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("a trainer spec round-trips through its JSON", "[trainer_spec]") {
  const TrainerSpec s = Full();
  REQUIRE(s.Validate().ok());
  const std::string text = DumpJson(s.ToJson());
  Result<TrainerSpec> back = TrainerSpec::Parse(text);
  REQUIRE(back.ok());
  CHECK(back->job_id == s.job_id);
  CHECK(back->kind == s.kind);
  CHECK(back->params == s.params);
  CHECK(back->steps == 10);
  CHECK(back->epoch == 3);
  REQUIRE(back->inputs.size() == 2);
  CHECK(back->inputs[0].name == "dataset");
  CHECK(back->inputs[0].path == "/w/cache/abc");
  CHECK(back->inputs[0].format.empty());
  CHECK(back->inputs[1].name == "model");
  CHECK(back->inputs[1].path == "/w/inputs/model");
  CHECK(back->ModelFormat() == kModelFormatDiffusers);
  CHECK(back->model_config == s.model_config);
  CHECK(back->resume_dir == "/w/resume");
  CHECK(back->resume_step == 4);
  CHECK(back->stop_at_step == 8);
  CHECK(DumpJson(back->ToJson()) == text);
}

TEST_CASE("the trainer spec keeps the form trainers read today", "[trainer_spec]") {
  // inputs as name -> path, model.format beside model.config, steps at the top and in params.
  Json j = Full().ToJson();
  CHECK(j["inputs"] == Json{{"dataset", "/w/cache/abc"}, {"model", "/w/inputs/model"}});
  CHECK(j["model"]["format"] == "diffusers");
  CHECK(j["model"]["config"]["sample_size"] == 64);
  CHECK(j["steps"] == 10);
  CHECK(j["params"]["steps"] == 10);
  CHECK(j["params"]["rank"] == 4);
  CHECK(j["epoch"] == 3);
  CHECK(j["job_id"] == "j_1");
  CHECK(j["kind"] == "lora-sd");

  // A job with neither a model nor a resume: no model, resume or stop_at_step keys.
  TrainerSpec tiny;
  tiny.kind = "synthetic";
  tiny.steps = 3;
  tiny.params = {{"checkpoint_every", 2}};
  Json t = tiny.ToJson();
  CHECK(DumpJson(t) ==
        R"({"inputs":{},"kind":"synthetic","params":{"checkpoint_every":2,"steps":3},"steps":3})");
  CHECK(tiny.CommandLine("train", "/w/SPEC.json", "/w", "") ==
        std::vector<std::string>{"train", "run", "--spec", "/w/SPEC.json", "--work-dir", "/w"});
}

TEST_CASE("steps has one owner: the top-level number, mirrored into params", "[trainer_spec]") {
  TrainerSpec s = Full();
  s.params["steps"] = 99;  // whatever the params said, the spec's steps wins on the wire
  CHECK(s.ToJson()["params"]["steps"] == 10);

  // A spec written by hand with only params.steps (local runs, the trainer's tests).
  Result<TrainerSpec> hand =
      TrainerSpec::Parse(R"({"kind":"synthetic","params":{"steps":7},"inputs":{}})");
  REQUIRE(hand.ok());
  CHECK(hand->steps == 7);

  CHECK(ErrorOf(With("/params/steps", 11)) ==
        "spec.params.steps (11) differs from spec.steps (10)");
  CHECK(ErrorOf(R"({"kind":"synthetic","params":{}})") ==
        "spec.steps is required (or spec.params.steps, as the kind reads it)");
}

TEST_CASE("the command line comes from the same spec", "[trainer_spec]") {
  CHECK(Full().CommandLine("gleaner-train", "/w/SPEC.json", "/w", "/c") ==
        std::vector<std::string>{"gleaner-train", "run", "--spec", "/w/SPEC.json", "--work-dir",
                                 "/w", "--stop-at-step", "8", "--resume", "/w/resume",
                                 "--cache-dir", "/c"});
}

TEST_CASE("every malformed or missing spec field is named", "[trainer_spec]") {
  CHECK(Mentions(ErrorOf("{"), "spec: "));
  CHECK(ErrorOf("[]") == "spec must be a JSON object");
  CHECK(ErrorOf(With("/extra", 1)) == "spec.extra is not a known field");
  CHECK(ErrorOf(Without("kind")) == "spec.kind is required");
  CHECK(ErrorOf(With("/kind", "")) == "spec.kind must not be empty");
  CHECK(ErrorOf(With("/kind", 5)) == "spec.kind must be a string");
  CHECK(ErrorOf(With("/job_id", 5)) == "spec.job_id must be a string");
  CHECK(ErrorOf(With("/params", "x")) == "spec.params must be an object");
  CHECK(ErrorOf(With("/params/steps", "x")) ==
        "spec.params.steps must be an integer in [1, 1099511627776]");
  CHECK(ErrorOf(With("/steps", 0)) == "spec.steps must be an integer in [1, 1099511627776]");
  CHECK(ErrorOf(With("/steps", 1.5)) == "spec.steps must be an integer in [1, 1099511627776]");
  CHECK(ErrorOf(With("/epoch", -1)) == "spec.epoch must be an integer in [0, 9223372036854775807]");
  CHECK(ErrorOf(With("/inputs", Json::array())) == "spec.inputs must be an object");
  CHECK(ErrorOf(With("/inputs/dataset", 3)) ==
        "spec.inputs.dataset must be a string (a local path)");
  CHECK(ErrorOf(With("/inputs/dataset", "")) ==
        "spec.inputs.dataset must be a local path, not empty");
  CHECK(ErrorOf(With("/inputs/da ta", "/x")) ==
        "spec.inputs.da ta: an input name is 1 to 64 of [A-Za-z0-9_.-]");
  CHECK(ErrorOf(With("/inputs/dataset", std::string(5000, 'a'))) ==
        "spec.inputs.dataset is longer than 4096 bytes");
  CHECK(ErrorOf(With("/model", 1)) == "spec.model must be an object");
  CHECK(ErrorOf(With("/model/weights", 1)) == "spec.model.weights is not a known field");
  CHECK(ErrorOf(With("/model/config", 1)) == "spec.model.config must be an object");
  CHECK(ErrorOf(With("/model/format", 1)) == "spec.model.format must be a string");
  CHECK(ErrorOf(With("/model/format", "ckpt")) ==
        "spec.model.format 'ckpt' is not a known model format (diffusers, unet-safetensors)");
  CHECK(ErrorOf(With("/model/format", "")) ==
        "spec.model.format '' is not a known model format (diffusers, unet-safetensors)");
  {
    Json j = Full().ToJson();
    j["inputs"].erase("model");
    CHECK(ErrorOf(DumpJson(j)) == "spec.model.format is given but spec.inputs.model is not");
  }
  CHECK(ErrorOf(With("/resume", "x")) == "spec.resume must be an object");
  CHECK(ErrorOf(With("/resume/at", 1)) == "spec.resume.at is not a known field");
  CHECK(ErrorOf(With("/resume", Json{{"step", 2}})) == "spec.resume.dir is required");
  CHECK(ErrorOf(With("/resume/dir", "")) == "spec.resume.dir must not be empty");
  CHECK(ErrorOf(With("/resume", Json{{"dir", "/r"}})) == "spec.resume.step is required");
  CHECK(ErrorOf(With("/resume/step", 11)) == "spec.resume.step must be an integer in [0, 10]");
  CHECK(ErrorOf(With("/stop_at_step", 0)) == "spec.stop_at_step must be an integer in [1, 10]");
  CHECK(ErrorOf(With("/stop_at_step", 11)) == "spec.stop_at_step must be an integer in [1, 10]");
  CHECK(ErrorOf(With("/stop_at_step", 4)) ==
        "spec.stop_at_step (4) is not after spec.resume.step (4)");
  CHECK(ErrorOf(R"({"kind":"a","kind":"b","steps":1})") != "(parsed)");  // duplicate key
  CHECK(Mentions(ErrorOf(std::string(kMaxSpecBytes + 1, ' ')), "larger than"));
}

TEST_CASE("Validate refuses what the JSON cannot carry", "[trainer_spec]") {
  TrainerSpec s = Full();
  s.inputs.push_back({"model", "/elsewhere", ""});
  CHECK(s.Validate().message() == "spec.inputs.model is given twice");
  s = Full();
  s.inputs[0].format = kModelFormatDiffusers;
  CHECK(s.Validate().message() == "spec.inputs.dataset has a format; only the model has one");
  s = Full();
  s.inputs[1].format = "flux-single-file";
  CHECK(s.Validate().message() ==
        "spec.model.format 'flux-single-file' is not a known model format");
  s = Full();
  s.steps = 0;
  CHECK(s.Validate().message() == "spec.steps must be an integer in [1, 1099511627776]");
  s = Full();
  s.params = Json::array();
  CHECK(s.Validate().message() == "spec.params must be an object");
  s = Full();
  s.resume_dir.clear();
  CHECK(s.Validate().message() == "spec.resume.step is given without spec.resume.dir");
}
