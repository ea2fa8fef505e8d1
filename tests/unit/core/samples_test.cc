// Samples as job artifacts: upload URL + commit under the lease fence, the first commit of a
// step wins, listing (owner developer or operator only), the result's final samples, the
// sampling time in the job view and the cost report, and the blob overwrite guard.
#include "tests/unit/core/test_env.h"

using namespace gleaner;
using namespace gleaner::testing;

namespace {

struct Running {
  std::string dev, job;
  NodeRef node;
};

Running Start(TestEnv& env) {
  Running r;
  r.dev = env.Developer();
  r.job =
      env.Submit(r.dev, 20, 0,
                 {{"params",
                   {{"steps", 20},
                    {"checkpoint_every", 10},
                    {"sample_prompts",
                     Json::array({"a cat", {{"prompt", "a dog"}, {"negative_prompt", "blur"}}})},
                    {"sample_every", 10}}}});
  r.node = env.Node("holder");
  REQUIRE(env.ClaimedJob(r.node) == r.job);
  return r;
}

Json Image(int index, const std::string& bytes, const std::string& prompt) {
  return {{"index", index},
          {"sha256", HexEncode(Sha256Of(bytes))},
          {"size", int64_t(bytes.size())},
          {"prompt", prompt},
          {"negative_prompt", index == 1 ? "blur" : ""}};
}

// Uploads both images of `step` (stored as the built-in store would) and commits them.
Resp CommitStep(TestEnv& env, const Running& run, int64_t epoch, int64_t step,
                const std::string& salt = "", double seconds = 2.5) {
  Json images = Json::array();
  for (int i = 0; i < 2; ++i) {
    Resp url = env.Post("/v1/jobs/" + run.job + "/samples", run.node.token,
                        {{"epoch", epoch}, {"step", step}, {"index", i}});
    if (url.status != 200) return url;
    std::string bytes = "png-" + std::to_string(step) + "-" + std::to_string(i) + salt;
    env.StoreBlob(url.json["key"].get<std::string>(), bytes);
    images.push_back(Image(i, bytes, i == 0 ? "a cat" : "a dog"));
  }
  return env.Post("/v1/jobs/" + run.job + "/samples/" + std::to_string(step) + "/commit",
                  run.node.token,
                  {{"epoch", epoch}, {"seed", 7}, {"seconds", seconds}, {"images", images}});
}

}  // namespace

TEST_CASE("samples: params normalised on submission", "[samples]") {
  TestEnv env;
  Running run = Start(env);
  Resp job = env.Get("/v1/jobs/" + run.job, run.dev);
  REQUIRE(job.status == 200);
  const Json& p = job.json["params"];
  CHECK(p["sample_prompts"][0] == Json({{"prompt", "a cat"}, {"negative_prompt", ""}}));
  CHECK(p["sample_steps"] == 25);
  CHECK(p["guidance_scale"] == 7.5);
  CHECK(p["sample_seed"] == 0);
  CHECK(p["sample_resolution"] == 512);
  CHECK(job.json["sampling_s"] == 0.0);
  CHECK(job.json["latest_sample_step"].is_null());
  Resp bad = env.Post(
      "/v1/jobs", run.dev,
      {{"kind", "synthetic"}, {"params", {{"steps", 10}, {"sample_prompts", Json::array()}}}});
  CHECK(bad.status == 400);
  CHECK(bad.ErrorCode() == "bad_request");
  CHECK(bad.json["error"]["message"].get<std::string>().find("sample_prompts") !=
        std::string::npos);
}

TEST_CASE("samples: commit, list newest first, result, sampling time", "[samples]") {
  TestEnv env;
  Running run = Start(env);
  Resp c = CommitStep(env, run, 1, 10);
  INFO(c.body);
  REQUIRE(c.status == 200);
  CHECK(c.json["committed"] == true);
  REQUIRE(CommitStep(env, run, 1, 20, "", 1.5).status == 200);
  // A retry, or the same step from a later lease, keeps the first commit.
  Resp again = CommitStep(env, run, 1, 10, "-other");
  REQUIRE(again.status == 200);
  CHECK(again.json["committed"] == false);

  Resp list = env.Get("/v1/jobs/" + run.job + "/samples", run.dev);
  INFO(list.body);
  REQUIRE(list.status == 200);
  REQUIRE(list.json["steps"].size() == 2);
  CHECK(list.json["steps"][0]["step"] == 20);
  CHECK(list.json["steps"][1]["step"] == 10);
  CHECK(list.json["sampling_s"] == Approx(4.0));
  const Json& img = list.json["steps"][1]["images"][1];
  CHECK(img["index"] == 1);
  CHECK(img["name"] == "samples/10/1.png");
  CHECK(img["prompt"] == "a dog");
  CHECK(img["negative_prompt"] == "blur");
  CHECK(img["sha256"] == HexEncode(Sha256Of("png-10-1")));
  CHECK(img["url"].get<std::string>().find("/samples/e1/s0000000010/1.png") != std::string::npos);
  // Paging: limit 1, then before the last step seen.
  Resp page = env.Get("/v1/jobs/" + run.job + "/samples?limit=1", env.operator_token);
  REQUIRE(page.status == 200);
  REQUIRE(page.json["steps"].size() == 1);
  CHECK(page.json["next_before"] == 20);
  Resp rest = env.Get("/v1/jobs/" + run.job + "/samples?limit=1&before=20", run.dev);
  REQUIRE(rest.json["steps"].size() == 1);
  CHECK(rest.json["steps"][0]["step"] == 10);
  CHECK(env.Get("/v1/jobs/" + run.job + "/samples?limit=0", run.dev).status == 400);

  // Sampling time: in the job view and, per segment, in the cost report.
  Resp job = env.Get("/v1/jobs/" + run.job, run.dev);
  CHECK(job.json["sampling_s"] == Approx(4.0));
  CHECK(job.json["latest_sample_step"] == 20);
  env.Advance(30);
  REQUIRE(env.Heartbeat(run.node, run.job, 1, 20).status == 200);
  Resp cost = env.Get("/v1/reports/cost?group_by=job", env.operator_token);
  REQUIRE(cost.status == 200);
  CHECK(cost.json["totals"]["sampling_seconds"] == Approx(4.0));
  CHECK(cost.json["totals"]["sampling_cost_usd"].get<double>() <=
        cost.json["totals"]["cost_usd"].get<double>());
  Resp csv = env.Get("/v1/reports/cost?group_by=job&format=csv", env.operator_token);
  CHECK(csv.body.find(",sampling_seconds,sampling_cost_usd,") != std::string::npos);

  // The final samples are part of the result.
  REQUIRE(env.Complete(run.node, run.job, 1).status == 200);
  Resp result = env.Get("/v1/jobs/" + run.job + "/result", run.dev);
  REQUIRE(result.status == 200);
  CHECK(result.json["samples"]["step"] == 20);
  CHECK(result.json["samples"]["images"].size() == 2);
}

TEST_CASE("samples: only the owner developer or an operator sees them", "[samples]") {
  TestEnv env;
  Running run = Start(env);
  REQUIRE(CommitStep(env, run, 1, 10).status == 200);
  const std::string path = "/v1/jobs/" + run.job + "/samples";
  CHECK(env.Get(path, run.dev).status == 200);
  CHECK(env.Get(path, env.operator_token).status == 200);
  CHECK(env.Get(path, env.Developer()).status == 404);  // another developer
  CHECK(env.Get(path, run.node.token).status == 403);   // a node
  CHECK(env.Get(path, "glt_not_a_token_000000000000").status == 401);
  CHECK(env.Get("/v1/jobs/j_missing/samples", run.dev).status == 404);
}

TEST_CASE("samples: fenced by the lease, verified against the store", "[samples]") {
  TestEnv env;
  Running run = Start(env);
  NodeRef intruder = env.Node("intruder");
  const std::string base = "/v1/jobs/" + run.job;
  CHECK(env.Post(base + "/samples", intruder.token, {{"epoch", 1}, {"step", 10}, {"index", 0}})
            .status == 409);
  CHECK(env.Post(base + "/samples", run.node.token, {{"epoch", 2}, {"step", 10}, {"index", 0}})
            .status == 409);
  CHECK(env.Post(base + "/samples", run.node.token, {{"epoch", 1}, {"step", 21}, {"index", 0}})
            .status == 400);
  CHECK(env.Post(base + "/samples", run.node.token, {{"epoch", 1}, {"step", 10}, {"index", 8}})
            .status == 400);
  // Not uploaded: 400, nothing recorded.
  Json images = Json::array({Image(0, "never stored", "a cat")});
  Resp missing = env.Post(base + "/samples/10/commit", run.node.token,
                          {{"epoch", 1}, {"seed", 1}, {"seconds", 1}, {"images", images}});
  CHECK(missing.status == 400);
  CHECK(env.Scalar("SELECT count(*) FROM sample_steps") == 0);
  // Indexes must be 0..n-1 in order; sha256 syntax; step in the path.
  Json shuffled = Json::array({Image(1, "x", "a cat")});
  CHECK(env.Post(base + "/samples/10/commit", run.node.token,
                 {{"epoch", 1}, {"seed", 1}, {"seconds", 1}, {"images", shuffled}})
            .status == 400);
  CHECK(env.Post(base + "/samples/0/commit", run.node.token,
                 {{"epoch", 1}, {"seed", 1}, {"seconds", 1}, {"images", images}})
            .status == 400);
  // Another node's commit: 409.
  Running other = run;
  other.node = intruder;
  CHECK(CommitStep(env, other, 1, 10).status == 409);
  CHECK(env.Scalar("SELECT count(*) FROM samples") == 0);
  // A committed image is never replaced by other bytes at its key.
  REQUIRE(CommitStep(env, run, 1, 10).status == 200);
  std::string key = env.Query("SELECT key FROM samples WHERE idx = 0").Get(0, "key").AsText();
  core::Plan place = env.coord.BlobPlacePlan(key, HexEncode(Sha256Of("other bytes")));
  CHECK(core::Drive(std::move(place), *env.db).response().status == 409);
  core::Plan same = env.coord.BlobPlacePlan(key, HexEncode(Sha256Of("png-10-0")));
  CHECK(core::Drive(std::move(same), *env.db).response().status == 204);
}
