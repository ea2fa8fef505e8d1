// A job's base model as a diffusers folder (model.files): checks at submission, and the claim's
// per-file download URLs.
#include "coordinator/core/settings.h"
#include "shared/sha256.h"
#include "tests/unit/core/test_env.h"

using namespace gleaner;
using namespace gleaner::testing;

namespace {

// Uploads one file per path (content = path) and returns the model.files array.
Json UploadFolder(TestEnv& env, const std::string& dev, const std::vector<std::string>& paths) {
  Json files = Json::array();
  for (const std::string& p : paths) {
    Resp r = env.Post("/v1/uploads", dev,
                      {{"name", p}, {"size", int64_t(p.size())}, {"sha256", Sha256Hex(p)}});
    REQUIRE(r.status == 201);
    env.StoreBlob(r.json["key"], p);
    files.push_back(
        {{"path", p}, {"uri", r.json["uri"]}, {"sha256", Sha256Hex(p)}, {"size", p.size()}});
  }
  return files;
}

const std::vector<std::string> kSd15 = {"model_index.json",
                                        "unet/config.json",
                                        "unet/diffusion_pytorch_model.safetensors",
                                        "vae/config.json",
                                        "vae/diffusion_pytorch_model.safetensors",
                                        "text_encoder/config.json",
                                        "text_encoder/model.safetensors",
                                        "tokenizer/vocab.json",
                                        "tokenizer/merges.txt"};

Json Dataset(TestEnv& env, const std::string& dev) {
  Resp r = env.Post("/v1/uploads", dev,
                    {{"name", "photos.zip"}, {"size", 4}, {"sha256", Sha256Hex("zip!")}});
  REQUIRE(r.status == 201);
  env.StoreBlob(r.json["key"], "zip!");
  return {{"uri", r.json["uri"]}, {"sha256", Sha256Hex("zip!")}};
}

Resp Submit(TestEnv& env, const std::string& dev, const Json& model, const Json& dataset) {
  return env.Post(
      "/v1/jobs", dev,
      {{"kind", "lora-sd"}, {"params", {{"steps", 10}}}, {"model", model}, {"dataset", dataset}});
}

}  // namespace

TEST_CASE("model files: a diffusers folder job is accepted and claimed with one URL per file",
          "[model_files]") {
  CoreConfig config = TestConfig();
  config.model_hosts = {"models.example"};
  TestEnv env(config);
  std::string dev = env.Developer();
  Json files = UploadFolder(env, dev, kSd15);
  files.push_back({{"path", "scheduler/scheduler_config.json"},
                   {"url", "https://models.example/scheduler_config.json"},
                   {"sha256", Sha256Hex("s")},
                   {"size", 1}});
  Resp job = Submit(env, dev, {{"files", files}}, Dataset(env, dev));
  REQUIRE(job.status == 201);
  CHECK(job.json["model"]["files"].size() == files.size());
  NodeRef node = env.Node("n");
  Resp claim = env.Claim(node);
  REQUIRE(claim.status == 200);
  const Json& got = claim.json["inputs"]["model"]["files"];
  REQUIRE(got.size() == files.size());
  for (size_t i = 0; i < kSd15.size(); ++i) {
    CHECK(got[i]["path"] == kSd15[i]);
    CHECK(got[i]["sha256"] == Sha256Hex(kSd15[i]));
    CHECK(got[i]["size"] == int64_t(kSd15[i].size()));
    CHECK(got[i]["url"].get<std::string>().find("/blobs/uploads/") != std::string::npos);
    CHECK(got[i].contains("expires_at"));
  }
  CHECK(got[kSd15.size()]["url"] == "https://models.example/scheduler_config.json");
  // The file given by url is marked remote (the node fetches it behind its network guard);
  // the coordinator's own blob URLs are not.
  CHECK(got[kSd15.size()].value("remote", false));
  CHECK(!got[0].contains("remote"));
  CHECK(claim.json["inputs"]["dataset"].contains("url"));
  // The model says its form: a folder of files is a diffusers model.
  CHECK(claim.json["inputs"]["model"]["format"] == "diffusers");
  CHECK_FALSE(claim.json["inputs"]["dataset"].contains("format"));
  // The fresh-URL route mints the same files again.
  Resp again = env.Post("/v1/jobs/" + job.json["id"].get<std::string>() + "/downloads", node.token,
                        {{"epoch", claim.json["lease"]["epoch"]}});
  REQUIRE(again.status == 200);
  CHECK(again.json["inputs"]["model"]["files"].size() == files.size());
}

TEST_CASE("model files: submission checks answer 400 with the problem named", "[model_files]") {
  TestEnv env;
  std::string dev = env.Developer();
  Json files = UploadFolder(env, dev, kSd15);
  Json data = Dataset(env, dev);
  auto error_of = [&](const Json& model) {
    Resp r = Submit(env, dev, model, data);
    CHECK(r.status == 400);
    return r.json["error"]["message"].get<std::string>();
  };
  Json missing = files;
  missing.erase(2);
  CHECK(error_of({{"files", missing}}) ==
        "model.files: not a diffusers folder: missing unet/*.safetensors");
  Json wrong_size = files;
  wrong_size[3]["size"] = 999;
  CHECK(error_of({{"files", wrong_size}}) ==
        "model.files[3] (vae/config.json).size does not match the upload's size");
  Json wrong_sha = files;
  wrong_sha[4]["sha256"] = Sha256Hex("other");
  CHECK(error_of({{"files", wrong_sha}}).find("sha256 does not match") != std::string::npos);
  Json no_sha = files;
  no_sha[0].erase("sha256");
  CHECK(error_of({{"files", no_sha}}).find("model.files[0].sha256") != std::string::npos);
  Json sdxl_config = {{"block_out_channels", {32, 64}},
                      {"cross_attention_dim", 32},
                      {"addition_embed_type", "text_time"},
                      {"addition_time_embed_dim", 8},
                      {"projection_class_embeddings_input_dim", 6 * 8 + 32}};
  CHECK(error_of({{"files", files}, {"config", sdxl_config}})
            .find("not a diffusers SDXL folder: missing text_encoder_2/config.json") !=
        std::string::npos);
  CHECK(error_of({{"files", files}, {"uri", "blob://uploads/x/y"}}).find("uri") !=
        std::string::npos);
  // Another developer's uploads are not usable.
  std::string other = env.Developer();
  Resp r = Submit(env, other, {{"files", files}}, Dataset(env, other));
  CHECK(r.status == 400);
  CHECK(r.json["error"]["message"].get<std::string>().find("names no upload of yours") !=
        std::string::npos);
}

TEST_CASE("model files: an announced but never stored file is 409", "[model_files]") {
  TestEnv env;
  std::string dev = env.Developer();
  Json files = UploadFolder(env, dev, std::vector<std::string>(kSd15.begin(), kSd15.end() - 1));
  const std::string last = kSd15.back();
  Resp up = env.Post("/v1/uploads", dev,
                     {{"name", last}, {"size", int64_t(last.size())}, {"sha256", Sha256Hex(last)}});
  REQUIRE(up.status == 201);
  files.push_back({{"path", last},
                   {"uri", up.json["uri"]},
                   {"sha256", Sha256Hex(last)},
                   {"size", last.size()}});
  Resp r = Submit(env, dev, {{"files", files}}, Dataset(env, dev));
  CHECK(r.status == 409);
  CHECK(r.json["error"]["message"] ==
        "model.files[8] (tokenizer/merges.txt).uri has not been uploaded yet (PUT it first)");
}

TEST_CASE("model files: a url is accepted only on a host the operator allows (--model-hosts)",
          "[model_files]") {
  auto with_url = [](TestEnv& env, const std::string& dev, const std::string& url) {
    Json files = UploadFolder(env, dev, kSd15);
    files.push_back({{"path", "scheduler/scheduler_config.json"},
                     {"url", url},
                     {"sha256", Sha256Hex("s")},
                     {"size", 1}});
    return Submit(env, dev, {{"files", files}}, Dataset(env, dev));
  };
  SECTION("no hosts allowed (the default): every url is refused") {
    TestEnv env;
    std::string dev = env.Developer();
    for (const char* url : {"https://models.example/s.json", "http://127.0.0.1:8080/secret",
                            "http://169.254.169.254/latest/meta-data/", "http://[::1]/x"}) {
      Resp r = with_url(env, dev, url);
      CHECK(r.status == 400);
      CHECK(r.json["error"]["message"] ==
            "model.files[9].url: this coordinator allows no model hosts (--model-hosts); "
            "upload the file (blob:// uri) instead");
    }
  }
  SECTION("a list: only its hosts, whatever the port, case or trailing dot") {
    CoreConfig config = TestConfig();
    const core::Setting* s = core::FindCoreSetting("model-hosts");
    REQUIRE(s != nullptr);
    REQUIRE(core::ApplyCoreSetting(&config, *s, "Models.Example, mirror.example", "test").ok());
    REQUIRE(config.Validate().ok());
    CHECK(s->get(config) == "models.example,mirror.example");
    TestEnv env(config);
    std::string dev = env.Developer();
    CHECK(with_url(env, dev, "https://models.example/s.json").status == 201);
    CHECK(with_url(env, dev, "https://MODELS.example.:8443/s.json").status == 201);
    CHECK(with_url(env, dev, "http://mirror.example/a/b?c=d").status == 201);
    for (const char* url :
         {"https://evil.example/s.json", "http://127.0.0.1/x", "http://10.0.0.1/x",
          "https://models.example.evil.example/s.json", "https://models.example@127.0.0.1/x",
          "https://evil.example\\@models.example/x", "http://[::1]/x",
          "https://models.example%2f@127.0.0.1/", "https://models.example:80x/"}) {
      INFO(url);
      Resp r = with_url(env, dev, url);
      CHECK(r.status == 400);
      std::string m = r.json["error"]["message"].get<std::string>();
      CHECK(m.rfind("model.files[9].url", 0) == 0);
    }
    Resp r = with_url(env, dev, "https://evil.example/s.json");
    CHECK(r.json["error"]["message"] ==
          "model.files[9].url: host 'evil.example' is not allowed; allowed model hosts: "
          "models.example, mirror.example");
  }
  SECTION("a bad name in the list is a configuration error") {
    CoreConfig config = TestConfig();
    const core::Setting* s = core::FindCoreSetting("model-hosts");
    REQUIRE(core::ApplyCoreSetting(&config, *s, "ok.example,bad/host", "test").ok());
    Status v = config.Validate();
    CHECK(!v.ok());
    CHECK(v.message() == "model-hosts: 'bad/host' is not a host name");
  }
}

namespace {

const std::vector<std::string> kFlux = {"model_index.json",
                                        "transformer/config.json",
                                        "transformer/diffusion_pytorch_model.safetensors",
                                        "vae/config.json",
                                        "vae/diffusion_pytorch_model.safetensors",
                                        "text_encoder/config.json",
                                        "text_encoder/model.safetensors",
                                        "tokenizer/vocab.json",
                                        "tokenizer/merges.txt",
                                        "text_encoder_2/config.json",
                                        "text_encoder_2/model.safetensors",
                                        "tokenizer_2/tokenizer.json"};

}  // namespace

TEST_CASE("model files: a FLUX folder's family decides which params apply", "[model_files]") {
  TestEnv env(TestConfig());
  std::string dev = env.Developer();
  Json flux = UploadFolder(env, dev, kFlux);
  Json sd = UploadFolder(env, dev, kSd15);
  auto submit = [&](const Json& files, const Json& params) {
    return env.Post("/v1/jobs", dev,
                    {{"kind", "lora-sd"},
                     {"params", params},
                     {"model", {{"files", files}}},
                     {"dataset", Dataset(env, dev)}});
  };
  // FLUX: flow-matching fields with their defaults; none of the DDPM ones.
  Resp ok = submit(flux, {{"steps", 10}, {"weighting_scheme", "logit_normal"}});
  REQUIRE(ok.status == 201);
  const Json& p = ok.json["params"];
  CHECK(p["weighting_scheme"] == "logit_normal");
  CHECK(p["guidance"] == 1.0);
  CHECK(p["max_sequence_length"] == 512);
  CHECK(p["lora_targets"] == "default");
  CHECK_FALSE(p.contains("prediction_type"));
  // A DDPM field on a FLUX model, and a FLUX field on a UNet, are refused naming the field.
  Resp mixed = submit(flux, {{"steps", 10}, {"prediction_type", "v_prediction"}});
  CHECK(mixed.status == 400);
  CHECK(mixed.json["error"]["message"].get<std::string>().find(
            "params.prediction_type does not apply to a FLUX model") != std::string::npos);
  Resp wrong = submit(sd, {{"steps", 10}, {"weighting_scheme", "cosmap"}});
  CHECK(wrong.status == 400);
  CHECK(wrong.json["error"]["message"].get<std::string>().find(
            "params.weighting_scheme applies to FLUX models only") != std::string::npos);
  // The transformer may be one single-file checkpoint without config.json (its shapes say it).
  std::vector<std::string> single;
  for (const std::string& p : kFlux) {
    if (p.rfind("transformer/", 0) != 0) single.push_back(p);
  }
  single.push_back("transformer/flux1-dev.safetensors");
  CHECK(submit(UploadFolder(env, dev, single), {{"steps", 10}}).status == 201);
  // A FLUX folder without its T5 tokenizer names what is missing.
  std::vector<std::string> partial(kFlux.begin(), kFlux.end() - 1);
  Resp missing = submit(UploadFolder(env, dev, partial), {{"steps", 10}});
  CHECK(missing.status == 400);
  CHECK(missing.json["error"]["message"].get<std::string>().find(
            "not a diffusers FLUX folder: missing tokenizer_2/tokenizer.json") !=
        std::string::npos);
}
