// Submissions: uploads, job creation and validation, idempotency, ownership, pagination.
#include <algorithm>
#include <tuple>

#include "tests/unit/core/test_env.h"

using namespace gleaner;
using namespace gleaner::testing;

namespace {
Json UnetConfig() {
  return {{"block_out_channels", {32, 64}}, {"cross_attention_dim", 32}, {"layers_per_block", 1}};
}
// Announces and "PUTs" an upload; returns {uri, sha256}.
std::pair<std::string, std::string> Upload(TestEnv& env, const std::string& dev,
                                           const std::string& name, const std::string& bytes,
                                           bool store = true) {
  Resp r =
      env.Post("/v1/uploads", dev,
               {{"name", name}, {"size", int64_t(bytes.size())}, {"sha256", Sha256Hex(bytes)}});
  REQUIRE(r.status == 201);
  if (store) env.StoreBlob(r.json["key"], bytes);
  return {r.json["uri"], Sha256Hex(bytes)};
}
}  // namespace

TEST_CASE("uploads: URI, sanitised key, PUT URL bound to size and sha256", "[jobs]") {
  TestEnv env;
  std::string dev = env.Developer();
  Resp r =
      env.Post("/v1/uploads", dev,
               {{"name", "../my data set.safetensors"}, {"size", 42}, {"sha256", Sha256Hex("x")}});
  REQUIRE(r.status == 201);
  std::string key = r.json["key"];
  CHECK(key.rfind("uploads/u_", 0) == 0);
  CHECK(key.substr(key.rfind('/') + 1) == "_my_data_set.safetensors");
  CHECK(r.json["uri"] == "blob://" + key);
  std::string url = r.json["url"];
  CHECK(url.find("m=PUT") != std::string::npos);
  CHECK(url.find("max=42") != std::string::npos);
  CHECK(url.find("sha=" + Sha256Hex("x")) != std::string::npos);
  auto grant =
      env.coord.AuthorizeBlob("PUT", "/blobs/" + key, url.substr(url.find('?') + 1), env.now_ms);
  REQUIRE(grant.ok());
  CHECK(grant->max_size == 42);
  CHECK(grant->sha256 == Sha256Hex("x"));
  for (const Json& bad :
       {Json{{"name", "a"}, {"size", -1}, {"sha256", Sha256Hex("x")}},
        Json{{"name", "a"}, {"size", 1}, {"sha256", "xyz"}}, Json{{"name", "a"}, {"size", 1}},
        Json{{"name", "a"}, {"size", 1}, {"sha256", Sha256Hex("x")}, {"x", 1}}}) {
    CHECK(env.Post("/v1/uploads", dev, bad).status == 400);
  }
}

TEST_CASE("jobs: created pending with normalised params - the view has every field", "[jobs]") {
  TestEnv env;
  std::string dev = env.Developer();
  Resp r = env.Post(
      "/v1/jobs", dev,
      {{"kind", "synthetic"}, {"params", {{"steps", 1000}, {"step_ms", 5}}}, {"priority", 3}});
  REQUIRE(r.status == 201);
  const Json& j = r.json;
  CHECK(j["state"] == "pending");
  CHECK(j["kind"] == "synthetic");
  CHECK(j["priority"] == 3);
  CHECK(j["steps"] == 1000);
  CHECK(j["step"] == 0);
  CHECK(j["attempts"] == 0);
  CHECK(j["failures"] == 0);
  CHECK(j["max_failures"] == 3);
  CHECK(j["lease_epoch"] == 0);
  CHECK(j["node_id"].is_null());
  CHECK(j["latest_checkpoint"].is_null());
  CHECK(j["cost_usd"] == 0.0);
  CHECK(j["outputs"].empty());
  CHECK(j["created_at"] == core::FormatTime(env.now_ms));
  CHECK(j["params"] ==
        Json({{"steps", 1000}, {"step_ms", 5}, {"checkpoint_every", 100}, {"seed", 0}}));
  std::string id = j["id"];
  CHECK(id.size() == 18);
  CHECK(id.rfind("j_", 0) == 0);
  Resp got = env.Get("/v1/jobs/" + id, dev);
  REQUIRE(got.status == 200);
  CHECK(got.json == j);
}

TEST_CASE("jobs: another developer's job is 404 - operators see everything", "[jobs]") {
  TestEnv env;
  std::string alice = env.Developer(), bob = env.Developer();
  std::string job = env.Submit(alice);
  CHECK(env.Get("/v1/jobs/" + job, bob).status == 404);
  CHECK(env.Get("/v1/jobs/" + job + "/events", bob).status == 404);
  CHECK(env.Get("/v1/jobs/" + job + "/result", bob).status == 404);
  std::string before = env.Snapshot();
  CHECK(env.Post("/v1/jobs/" + job + "/cancel", bob).status == 404);
  CHECK(env.Snapshot() == before);
  CHECK(env.Get("/v1/jobs", bob).json["jobs"].empty());
  CHECK(env.Get("/v1/jobs/" + job, env.operator_token).status == 200);
  CHECK(env.Get("/v1/jobs", env.operator_token).json["jobs"].size() == 1);
  CHECK(env.Get("/v1/jobs/j_doesnotexist", alice).status == 404);
  CHECK(env.Get("/v1/jobs/bad%20id", alice).status == 404);
}

TEST_CASE("jobs: Idempotency-Key returns the original job once, and rejects a different body",
          "[jobs]") {
  TestEnv env;
  std::string dev = env.Developer(), other = env.Developer();
  Json body = {{"kind", "synthetic"}, {"params", {{"steps", 10}}}};
  std::vector<std::pair<std::string, std::string>> key = {{"idempotency-key", "abc-1"}};
  Resp first = env.Post("/v1/jobs", dev, body, key);
  REQUIRE(first.status == 201);
  env.Advance(5);
  Resp again = env.Post("/v1/jobs", dev, body, key);
  CHECK(again.status == 200);
  CHECK(again.Header("Idempotent-Replayed") == "true");
  CHECK(again.json["id"] == first.json["id"]);
  CHECK(env.Scalar("SELECT count(*) FROM jobs") == 1);
  Json changed = body;
  changed["params"]["steps"] = 11;
  Resp conflict = env.Post("/v1/jobs", dev, changed, key);
  CHECK(conflict.status == 409);
  // The same key from another developer is a different job.
  Resp theirs = env.Post("/v1/jobs", other, body, key);
  CHECK(theirs.status == 201);
  CHECK(theirs.json["id"] != first.json["id"]);
  CHECK(env.Scalar("SELECT count(*) FROM jobs") == 2);
}

TEST_CASE("jobs: list paginates stably, newest first, filtered by state", "[jobs]") {
  TestEnv env;
  std::string dev = env.Developer();
  std::vector<std::string> ids;
  for (int i = 0; i < 7; ++i) {
    ids.push_back(env.Submit(dev));
    if (i % 2 == 0) env.Advance(1);  // some share a created_at
  }
  std::vector<std::string> seen;
  std::string cursor;
  int pages = 0;
  do {
    Resp r = env.Get("/v1/jobs?limit=3" + (cursor.empty() ? "" : "&cursor=" + cursor), dev);
    REQUIRE(r.status == 200);
    for (const Json& j : r.json["jobs"]) seen.push_back(j["id"]);
    cursor = r.json["next_cursor"].is_null() ? "" : r.json["next_cursor"].get<std::string>();
    if (pages == 0) env.Submit(dev);  // a job added meanwhile does not disturb later pages
    ++pages;
  } while (!cursor.empty());
  CHECK(pages == 3);
  REQUIRE(seen.size() == 7);
  std::vector<std::string> expected(ids.rbegin(), ids.rend());
  // Within equal created_at the order is by id DESC; compare as sets per timestamp by sorting.
  std::sort(seen.begin(), seen.end());
  std::sort(expected.begin(), expected.end());
  CHECK(seen == expected);
  NodeRef n = env.Node("n");
  std::string running = env.ClaimedJob(n);
  Resp r = env.Get("/v1/jobs?state=running", dev);
  REQUIRE(r.json["jobs"].size() == 1);
  CHECK(r.json["jobs"][0]["id"] == running);
  CHECK(env.Get("/v1/jobs?state=bogus", dev).status == 400);
  CHECK(env.Get("/v1/jobs?limit=0", dev).status == 400);
  CHECK(env.Get("/v1/jobs?limit=abc", dev).status == 400);
  CHECK(env.Get("/v1/jobs?cursor=zz", dev).status == 400);
}

TEST_CASE("jobs: lora-sd needs uploads of the same developer with matching sha256", "[jobs]") {
  TestEnv env;
  std::string dev = env.Developer(), other = env.Developer();
  auto [model_uri, model_sha] = Upload(env, dev, "unet.safetensors", "weights");
  auto [data_uri, data_sha] = Upload(env, dev, "data.safetensors", "latents");
  auto [pending_uri, pending_sha] = Upload(env, dev, "late.safetensors", "late", false);
  auto body = [&](const std::string& muri, const std::string& msha, const std::string& duri,
                  const std::string& dsha) {
    return Json{{"kind", "lora-sd"},
                {"params", {{"steps", 20}, {"rank", 8}}},
                {"model", {{"uri", muri}, {"sha256", msha}, {"config", UnetConfig()}}},
                {"dataset", {{"uri", duri}, {"sha256", dsha}}},
                {"requirements", {{"min_vram_mb", 8000}}}};
  };
  std::string before = env.Snapshot();
  CHECK(env.Post("/v1/jobs", other, body(model_uri, model_sha, data_uri, data_sha)).status == 400);
  CHECK(env.Post("/v1/jobs", dev, body(model_uri, data_sha, data_uri, data_sha)).status == 400);
  CHECK(env.Post("/v1/jobs", dev, body(model_uri, model_sha, pending_uri, pending_sha)).status ==
        409);
  CHECK(env.Post("/v1/jobs", dev, body("https://x/y", model_sha, data_uri, data_sha)).status ==
        400);
  Json no_config = body(model_uri, model_sha, data_uri, data_sha);
  no_config["model"].erase("config");
  CHECK(env.Post("/v1/jobs", dev, no_config).status == 400);
  Json no_data = body(model_uri, model_sha, data_uri, data_sha);
  no_data.erase("dataset");
  CHECK(env.Post("/v1/jobs", dev, no_data).status == 400);
  CHECK(env.Snapshot() == before);
  Resp ok = env.Post("/v1/jobs", dev, body(model_uri, model_sha, data_uri, data_sha));
  REQUIRE(ok.status == 201);
  CHECK(ok.json["params"]["alpha"] == 8.0);
  CHECK(ok.json["params"]["lr_scheduler"] == "constant");
  CHECK(ok.json["model"]["uri"] == model_uri);
  CHECK_FALSE(ok.json["model"].contains("key"));
  // The claim hands out inputs with URLs, sha256 and sizes, and the model config.
  NodeRef small = env.Node("small", 4000), big = env.Node("big", 16000);
  CHECK(env.Claim(small).status == 204);
  Resp w = env.Claim(big);
  REQUIRE(w.status == 200);
  CHECK(w.json["job"]["model"]["config"] == UnetConfig());
  CHECK(w.json["inputs"]["model"]["sha256"] == model_sha);
  CHECK(w.json["inputs"]["model"]["size"] == 7);
  // The model says its form: one file is the UNet weights (the node never guesses it); the
  // dataset has no format.
  CHECK(w.json["inputs"]["model"]["format"] == "unet-safetensors");
  CHECK_FALSE(w.json["inputs"]["dataset"].contains("format"));
  CHECK(w.json["inputs"]["dataset"]["size"] == 7);
  std::string url = w.json["inputs"]["dataset"]["url"];
  CHECK(url.find("/blobs/" + data_uri.substr(7) + "?m=GET") != std::string::npos);
}

TEST_CASE("jobs: an SDXL model config that cannot fit its inputs is 400 and changes nothing",
          "[jobs]") {
  TestEnv env;
  std::string dev = env.Developer();
  // Plain variables, not structured bindings: C++17 does not let a lambda capture those.
  std::string model_uri, model_sha, data_uri, data_sha;
  std::tie(model_uri, model_sha) = Upload(env, dev, "unet.safetensors", "weights");
  std::tie(data_uri, data_sha) = Upload(env, dev, "data.safetensors", "latents");
  Json xl = UnetConfig();
  xl["addition_embed_type"] = "text_time";
  xl["addition_time_embed_dim"] = 8;
  xl["projection_class_embeddings_input_dim"] = 80;
  auto body = [&](const Json& config) {
    return Json{{"kind", "lora-sd"},
                {"params", {{"steps", 20}}},
                {"model", {{"uri", model_uri}, {"sha256", model_sha}, {"config", config}}},
                {"dataset", {{"uri", data_uri}, {"sha256", data_sha}}}};
  };
  std::string before = env.Snapshot();
  Json no_pooled = xl;  // 6 * 8 = 48 leaves no room for a pooled text embedding
  no_pooled["projection_class_embeddings_input_dim"] = 48;
  Json no_time_dim = xl;
  no_time_dim.erase("addition_time_embed_dim");
  Json other_type = xl;
  other_type["addition_embed_type"] = "text_image";
  for (const Json& config : {no_pooled, no_time_dim, other_type}) {
    Resp r = env.Post("/v1/jobs", dev, body(config));
    INFO(config.dump() << " -> " << r.body);
    CHECK(r.status == 400);
    CHECK(r.ErrorCode() == "bad_request");
    CHECK(r.json["error"]["message"].get<std::string>().find("model.config.") == 0);
  }
  CHECK(env.Snapshot() == before);
  // One job kind for both: the same submission with a consistent SDXL config is accepted.
  Resp ok = env.Post("/v1/jobs", dev, body(xl));
  CHECK(ok.status == 201);
  CHECK(ok.json["kind"] == "lora-sd");
}

TEST_CASE("jobs: bad submissions are 400 and change nothing", "[jobs]") {
  TestEnv env;
  std::string dev = env.Developer();
  std::string before = env.Snapshot();
  const Json cases[] = {
      {{"kind", "nope"}, {"params", {{"steps", 1}}}},
      {{"params", {{"steps", 1}}}},
      {{"kind", 5}, {"params", {{"steps", 1}}}},
      {{"kind", "synthetic"}},
      {{"kind", "synthetic"}, {"params", {{"steps", 0}}}},
      {{"kind", "synthetic"}, {"params", {{"steps", -5}}}},
      {{"kind", "synthetic"}, {"params", {{"steps", 1e12}}}},
      {{"kind", "synthetic"}, {"params", {{"steps", "10"}}}},
      {{"kind", "synthetic"}, {"params", {{"steps", 1.5}}}},
      {{"kind", "synthetic"}, {"params", {{"steps", 10}, {"checkpoint_every", 11}}}},
      {{"kind", "synthetic"}, {"params", {{"steps", 10}, {"turbo", true}}}},
      {{"kind", "synthetic"}, {"params", {{"steps", 10}, {"fail_at_step", 0}}}},
      {{"kind", "synthetic"}, {"params", {{"steps", 10}}}, {"priority", 100000}},
      {{"kind", "synthetic"}, {"params", {{"steps", 10}}}, {"max_failures", 0}},
      {{"kind", "synthetic"}, {"params", {{"steps", 10}}}, {"requirements", {{"min_vram_mb", -1}}}},
      {{"kind", "synthetic"}, {"params", {{"steps", 10}}}, {"requirements", {{"gpus", 2}}}},
      {{"kind", "synthetic"}, {"params", {{"steps", 10}}}, {"extra", 1}},
      {{"kind", "synthetic"}, {"params", Json::array()}},
      {{"kind", "lora-sd"}, {"params", {{"steps", 10}}}},
      {{"kind", "lora-sd"}, {"params", {{"steps", 10}, {"num_class_images", 10}}}},
      {{"kind", "lora-sd"},
       {"params", {{"steps", 10}, {"class_prompt", "a dog"}, {"num_class_images", 1001}}}},
  };
  for (const Json& c : cases) {
    Resp r = env.Post("/v1/jobs", dev, c);
    INFO(c.dump() << " -> " << r.body);
    CHECK(r.status == 400);
    CHECK(r.ErrorCode() == "bad_request");
    CHECK(!r.json["error"]["message"].get<std::string>().empty());
  }
  // Params are checked before the inputs: the message names the field at fault.
  Resp no_prompt =
      env.Post("/v1/jobs", dev,
               {{"kind", "lora-sd"}, {"params", {{"steps", 10}, {"num_class_images", 10}}}});
  CHECK(no_prompt.status == 400);
  CHECK(no_prompt.json["error"]["message"].get<std::string>().find(
            "params.num_class_images needs params.class_prompt") != std::string::npos);
  CHECK(env.Snapshot() == before);
}
