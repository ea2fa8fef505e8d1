// POST /v1/jobs/{id}/downloads: the claim's inputs and resume minted again for the lease holder.
#include "tests/unit/core/test_env.h"

using namespace gleaner;
using namespace gleaner::testing;

namespace {

CoreConfig ShortUrls() {
  CoreConfig c = TestConfig();
  c.blob_url_ttl_s = 30;  // shorter than the lease (stall_after_s = 60)
  return c;
}

// Announces and stores an upload; returns its uri.
std::string Upload(TestEnv& env, const std::string& dev, const std::string& name,
                   const std::string& bytes) {
  Resp r =
      env.Post("/v1/uploads", dev,
               {{"name", name}, {"size", int64_t(bytes.size())}, {"sha256", Sha256Hex(bytes)}});
  REQUIRE(r.status == 201);
  env.StoreBlob(r.json["key"], bytes);
  return r.json["uri"];
}

// What the blob store answers for a GET of url now: the granted key, or "" when refused.
std::string Authorized(TestEnv& env, const std::string& url) {
  size_t start = url.find("/blobs/"), q = url.find('?');
  REQUIRE(start != std::string::npos);
  REQUIRE(q != std::string::npos);
  Result<core::BlobGrant> g =
      env.coord.AuthorizeBlob("GET", url.substr(start, q - start), url.substr(q + 1), env.now_ms);
  return g.ok() ? g->key : "";
}

Resp Downloads(TestEnv& env, const NodeRef& node, const std::string& job, int64_t epoch) {
  return env.Post("/v1/jobs/" + job + "/downloads", node.token, {{"epoch", epoch}});
}

}  // namespace

TEST_CASE("downloads: the claim's inputs with fresh URLs once the claim's have expired",
          "[downloads]") {
  TestEnv env(ShortUrls());
  std::string dev = env.Developer();
  std::string model = Upload(env, dev, "unet.safetensors", "weights");
  std::string data = Upload(env, dev, "data.safetensors", "latents!");
  Json config = {
      {"block_out_channels", {32, 64}}, {"cross_attention_dim", 32}, {"layers_per_block", 1}};
  Resp job =
      env.Post("/v1/jobs", dev,
               {{"kind", "lora-sd"},
                {"params", {{"steps", 20}, {"rank", 8}}},
                {"model", {{"uri", model}, {"sha256", Sha256Hex("weights")}, {"config", config}}},
                {"dataset", {{"uri", data}, {"sha256", Sha256Hex("latents!")}}}});
  REQUIRE(job.status == 201);
  std::string id = job.json["id"];
  NodeRef node = env.Node("n");
  Resp claim = env.Claim(node);
  REQUIRE(claim.status == 200);
  const Json& claimed = claim.json["inputs"];
  CHECK(Authorized(env, claimed["model"]["url"]) == model.substr(7));
  env.Advance(31);  // the claim's URLs expired; the lease (60 s) has not
  CHECK(Authorized(env, claimed["model"]["url"]).empty());
  CHECK(Authorized(env, claimed["dataset"]["url"]).empty());
  std::string before = env.Snapshot();
  Resp r = Downloads(env, node, id, 1);
  INFO(r.body);
  REQUIRE(r.status == 200);
  CHECK(env.Snapshot() == before);  // read-only
  CHECK_FALSE(r.json.contains("resume"));
  REQUIRE(r.json["inputs"].size() == 2);
  for (const char* field : {"model", "dataset"}) {
    INFO(field);
    const Json& in = r.json["inputs"][field];
    CHECK(in["sha256"] == claimed[field]["sha256"]);
    CHECK(in["size"] == claimed[field]["size"]);
    CHECK(in["url"] != claimed[field]["url"]);
    CHECK(in["expires_at"] == core::FormatTime(env.now_ms + 30000));
    CHECK(Authorized(env, in["url"]) == (field == std::string("model") ? model : data).substr(7));
  }
  CHECK(r.json["inputs"]["dataset"]["size"] == 8);
}

TEST_CASE("downloads: resume is present only once a checkpoint is committed", "[downloads]") {
  TestEnv env(ShortUrls());
  std::string dev = env.Developer();
  std::string job = env.Submit(dev, 100);
  NodeRef a = env.Node("a"), b = env.Node("b");
  REQUIRE(env.ClaimedJob(a) == job);
  Resp fresh = Downloads(env, a, job, 1);
  REQUIRE(fresh.status == 200);
  CHECK(fresh.json["inputs"] == Json::object());
  CHECK_FALSE(fresh.json.contains("resume"));
  // Uploaded but not committed: still no resume.
  Resp put = env.Post("/v1/jobs/" + job + "/checkpoints", a.token, {{"epoch", 1}, {"step", 10}});
  REQUIRE(put.status == 200);
  env.StoreBlob(put.json["key"], "uncommitted");
  CHECK_FALSE(Downloads(env, a, job, 1).json.contains("resume"));
  REQUIRE(env.Checkpoint(a, job, 1, 20, "twenty").status == 200);
  REQUIRE(env.Post("/v1/jobs/" + job + "/release", a.token, {{"epoch", 1}}).status == 200);
  Resp claim = env.Claim(b);
  REQUIRE(claim.status == 200);
  env.Advance(31);
  CHECK(Authorized(env, claim.json["resume"]["url"]).empty());
  Resp r = Downloads(env, b, job, 2);
  INFO(r.body);
  REQUIRE(r.status == 200);
  REQUIRE(r.json.contains("resume"));
  const Json& resume = r.json["resume"];
  CHECK(resume["step"] == 20);
  CHECK(resume["sha256"] == Sha256Hex("twenty"));
  CHECK(resume["size"] == 6);
  CHECK(resume["expires_at"] == core::FormatTime(env.now_ms + 30000));
  CHECK(Authorized(env, resume["url"]) == "jobs/" + job + "/ckpt/e1/s0000000020");
}

TEST_CASE("downloads: only the lease holder gets URLs, others 409 and unknown jobs 404",
          "[downloads]") {
  TestEnv env(ShortUrls());
  std::string dev = env.Developer();
  std::string job = env.Submit(dev, 100);
  NodeRef holder = env.Node("holder"), other = env.Node("other");
  REQUIRE(env.ClaimedJob(holder) == job);
  REQUIRE(env.Checkpoint(holder, job, 1, 10).status == 200);
  std::string before = env.Snapshot();
  struct Case {
    const char* what;
    NodeRef node;
    int64_t epoch;
    const char* message;
  };
  for (const Case& c : {Case{"stale epoch", holder, 2, "stale"},
                        Case{"other node", other, 1, "held by another node"}}) {
    INFO(c.what);
    Resp r = Downloads(env, c.node, job, c.epoch);
    CHECK(r.status == 409);
    CHECK(r.body.find(c.message) != std::string::npos);
    CHECK_FALSE(r.json.contains("inputs"));
  }
  CHECK(Downloads(env, holder, "j_nope", 1).status == 404);
  CHECK(Downloads(env, holder, "../x", 1).status == 404);
  CHECK(env.Post("/v1/jobs/" + job + "/downloads", holder.token, Json::object()).status == 400);
  CHECK(env.Snapshot() == before);
  env.Advance(61);
  Resp expired = Downloads(env, holder, job, 1);
  CHECK(expired.status == 409);
  CHECK(expired.body.find("the lease expired") != std::string::npos);
}
