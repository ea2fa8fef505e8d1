// shared/model_manifest.h: the diffusers-folder manifest parser and layout rules.
#include "shared/model_manifest.h"

#include <catch2/catch.hpp>

#include "shared/sha256.h"

using namespace gleaner;

namespace {

const std::string kSha(64, 'a');

Json File(const std::string& path) {
  return {{"path", path}, {"url", "https://models.example/" + path}, {"sha256", kSha}, {"size", 1}};
}

Json Sd15Files() {
  Json files = Json::array();
  for (const char* p :
       {"model_index.json", "unet/config.json", "unet/diffusion_pytorch_model.safetensors",
        "vae/config.json", "vae/diffusion_pytorch_model.safetensors", "text_encoder/config.json",
        "text_encoder/model.safetensors", "tokenizer/vocab.json", "tokenizer/merges.txt",
        "scheduler/scheduler_config.json"}) {
    files.push_back(File(p));
  }
  return files;
}

std::string Manifest(const Json& files) {
  return DumpJson({{"format", "gleaner-model"}, {"version", 1}, {"name", "m"}, {"files", files}});
}

std::string ErrorOf(const Json& files) {
  Result<ModelManifest> m = ParseModelManifest(Manifest(files));
  return m.ok() ? "" : m.status().message();
}

}  // namespace

TEST_CASE("model manifest: an SD 1.x folder parses and round-trips", "[model_manifest]") {
  Result<ModelManifest> m = ParseModelManifest(Manifest(Sd15Files()));
  REQUIRE(m.ok());
  CHECK(m->name == "m");
  CHECK(m->files.size() == 10);
  Result<ModelManifest> again = ParseModelManifest(ModelManifestToJson(*m));
  REQUIRE(again.ok());
  CHECK(ModelManifestToJson(*again) == ModelManifestToJson(*m));
}

TEST_CASE("model manifest: missing diffusers files are named", "[model_manifest]") {
  Json files = Sd15Files();
  files.erase(1);  // unet/config.json
  files.erase(5);  // text_encoder/model.safetensors (index shifted by one)
  CHECK(ErrorOf(files) ==
        "model manifest: not a diffusers folder: missing unet/config.json, "
        "text_encoder/*.safetensors");
}

TEST_CASE("model manifest: an SDXL folder needs both second encoders", "[model_manifest]") {
  Json files = Sd15Files();
  files.push_back(File("text_encoder_2/config.json"));
  CHECK(ErrorOf(files) ==
        "model manifest: not a diffusers SDXL folder: missing text_encoder_2/*.safetensors, "
        "tokenizer_2/vocab.json, tokenizer_2/merges.txt");
  files.push_back(File("text_encoder_2/model-00001-of-00002.safetensors"));
  files.push_back(File("text_encoder_2/model-00002-of-00002.safetensors"));
  files.push_back(File("text_encoder_2/model.safetensors.index.json"));
  files.push_back(File("tokenizer_2/vocab.json"));
  files.push_back(File("tokenizer_2/merges.txt"));
  CHECK(ErrorOf(files).empty());
  Result<std::vector<ModelFile>> sd15 = ParseModelFiles(Sd15Files(), "model.files");
  REQUIRE(sd15.ok());
  CHECK(!CheckDiffusersLayout(*sd15, /*sdxl=*/true).ok());
}

TEST_CASE("model manifest: bad files are refused with the field named", "[model_manifest]") {
  auto with = [](const Json& bad) {
    Json files = Sd15Files();
    files.push_back(bad);
    return ErrorOf(files);
  };
  CHECK(with(File("../etc/passwd")).find("files[10].path '../etc/passwd' must be") !=
        std::string::npos);
  CHECK(with(File("/abs")).find("must be a relative path") != std::string::npos);
  CHECK(with(File("unet//x")).find("must be a relative path") != std::string::npos);
  CHECK(with(File("unet/weights.bin")).find("pickle weights are not accepted") !=
        std::string::npos);
  CHECK(with(File("model_index.json")).find("appears twice") != std::string::npos);
  Json f = File("a.json");
  f["uri"] = "blob://uploads/u_1/a.json";
  CHECK(with(f).find("exactly one of uri") != std::string::npos);
  f = File("a.json");
  f["url"] = "file:///etc/passwd";
  CHECK(with(f).find("http:// or https://") != std::string::npos);
  f = File("a.json");
  f["sha256"] = "xyz";
  CHECK(!with(f).empty());
  f = File("a.json");
  f.erase("size");
  CHECK(with(f).find("size") != std::string::npos);
  f = File("a.json");
  f["extra"] = 1;
  CHECK(!with(f).empty());
  CHECK(!ParseModelManifest("{\"format\":\"gleaner-model\",\"version\":2,\"files\":[]}").ok());
  CHECK(!ParseModelManifest("[]").ok());
  CHECK(!ParseModelManifest(std::string(300000, ' ')).ok());
}

TEST_CASE("model manifest: UrlHost reads only a plain host out of a URL", "[model_manifest]") {
  struct Row {
    const char* url;
    const char* host;  // "" = refused
  };
  const Row rows[] = {
      {"https://models.example/a/b", "models.example"},
      {"https://Models.EXAMPLE:8443/a", "models.example"},
      {"http://models.example./a", "models.example"},
      {"http://models.example", "models.example"},
      {"http://models.example?x=1", "models.example"},
      {"http://models.example#frag", "models.example"},
      {"http://127.0.0.1:9/x", "127.0.0.1"},
      {"http://[::1]:8080/x", "[::1]"},
      {"http://[::FFFF:127.0.0.1]/x", "[::ffff:127.0.0.1]"},
      {"http://user@models.example/x", ""},
      {"http://models.example@127.0.0.1/x", ""},
      {"http://models.example%2f@127.0.0.1/x", ""},
      {"http://evil.example\\@models.example/x", ""},
      {"http://[fe80::1%25eth0]/x", ""},
      {"http:///x", ""},
      {"http://:80/x", ""},
      {"http://models.example:/x", ""},
      {"http://models.example:80a/x", ""},
      {"http://models.example:1234567/x", ""},
      {"http://[::1/x", ""},
      {"http://[::1]x/", ""},
      {"http://[models.example]/x", ""},
      {"http://mo!dels.example/x", ""},
      {"models.example/x", ""},
  };
  for (const Row& r : rows) {
    INFO(r.url);
    CHECK(UrlHost(r.url) == r.host);
  }
  CHECK(NormalizeHostName("::1") == "[::1]");
  CHECK(NormalizeHostName("Mirror.Example.") == "mirror.example");
  CHECK(NormalizeHostName("bad/host").empty());
  CHECK(NormalizeHostName("").empty());
}
