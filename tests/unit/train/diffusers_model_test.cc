// Base models in diffusers layout: the tiny generated folders load (SD and SDXL), weights in any
// float dtype or sharded load, and every missing or bad file is one error naming it.
#include "agent/train/models/loader/diffusers_model.h"

#include <cstdio>

#include "agent/train/models/flux/flux_single_file.h"
#include "agent/train/models/loader/tiny_diffusers_model.h"
#include "train_test_util.h"  // Catch2, via the CHECK fix-up

using namespace gleaner;
using namespace gleaner::train;
using namespace gleaner::train::models;
using gleaner::train::testing::TempDir;

namespace {

std::string Tiny(const TempDir& tmp, bool sdxl) {
  std::string dir = tmp / (sdxl ? "sdxl" : "sd");
  REQUIRE(WriteTinyDiffusersModel(dir, sdxl, 7).ok());
  return dir;
}

std::string ErrorOf(const std::string& dir, const DiffusersLoadOptions& o = {}) {
  Result<DiffusersModel> m = LoadDiffusersModel(dir, o);
  REQUIRE_FALSE(m.ok());
  return m.status().message();
}

}  // namespace

TEST_CASE("a tiny SD diffusers folder loads with every part", "[models]") {
  TempDir tmp;
  const std::string dir = Tiny(tmp, false);
  Result<DiffusersModel> m = LoadDiffusersModel(dir);
  REQUIRE(m.ok());
  CHECK_FALSE(m->sdxl());
  REQUIRE(m->text.size() == 1);
  CHECK(m->text[0].name == "text_encoder");
  CHECK(m->text[0].tokenizer.pad_token() == "<|endoftext|>");
  REQUIRE(m->text[0].model != nullptr);
  REQUIRE(m->vae != nullptr);
  CHECK(m->vae_config.scaling_factor == 0.18215);
  CHECK(m->vae_config.spatial_factor() == 2);
  CHECK(m->scheduler_config["_class_name"] == "PNDMScheduler");
  CHECK(!m->denoiser_weights.empty());
  for (const auto& [k, t] : m->denoiser_weights) CHECK(t.scalar_type() == torch::kFloat32);

  // The same seed gives the same bytes.
  TempDir again;
  std::string dir2 = again / "sd";
  REQUIRE(WriteTinyDiffusersModel(dir2, false, 7).ok());
  for (const char* f :
       {"/unet/diffusion_pytorch_model.safetensors", "/vae/diffusion_pytorch_model.safetensors",
        "/text_encoder/model.safetensors", "/tokenizer/vocab.json"}) {
    CHECK(*ReadFile(dir + f) == *ReadFile(dir2 + f));
  }

  // Only what is asked for; UNet weights in the training dtype.
  DiffusersLoadOptions o;
  o.vae = o.text_encoders = false;
  o.denoiser_dtype = torch::kBFloat16;
  Result<DiffusersModel> light = LoadDiffusersModel(dir, o);
  REQUIRE(light.ok());
  CHECK(light->vae == nullptr);
  CHECK(light->text[0].model == nullptr);
  for (const auto& [k, t] : light->denoiser_weights) CHECK(t.scalar_type() == torch::kBFloat16);
}

TEST_CASE("a tiny SDXL diffusers folder loads two encoders that fit the UNet", "[models]") {
  TempDir tmp;
  const std::string dir = Tiny(tmp, true);
  Result<DiffusersModel> m = LoadDiffusersModel(dir);
  REQUIRE(m.ok());
  CHECK(m->sdxl());
  REQUIRE(m->text.size() == 2);
  CHECK(m->text[1].name == "text_encoder_2");
  CHECK(m->text[1].config.with_projection);
  CHECK(m->text[1].tokenizer.pad_id() == 0);  // "!"
  CHECK(m->text[0].config.hidden_size + m->text[1].config.hidden_size ==
        m->unet()->cross_attention_dim);
  CHECK(m->vae_config.scaling_factor == 0.13025);
  // A prompt tokenizes to multi-character tokens of the tiny vocabulary.
  Result<std::vector<int32_t>> ids = m->text[0].tokenizer.Encode("a photo of sks dog");
  REQUIRE(ids.ok());
  CHECK(ids->size() == 7);  // bos a photo of sks dog eos
}

TEST_CASE("diffusers weights load from F16 and BF16 and sharded files", "[models]") {
  TempDir tmp;
  const std::string dir = Tiny(tmp, false);
  const std::string unet = dir + "/unet/diffusion_pytorch_model.safetensors";
  Result<TensorMap> w = LoadSafetensors(unet);
  REQUIRE(w.ok());
  // Half the tensors F16 in one shard, the rest BF16 in another, behind an index.
  TensorMap a, b;
  Json map = Json::object();
  bool first = true;
  for (const auto& [k, t] : *w) {
    (first ? a : b)[k] = t.to(first ? torch::kFloat16 : torch::kBFloat16);
    map[k] = first ? "part-1.safetensors" : "part-2.safetensors";
    first = !first;
  }
  REQUIRE(SaveSafetensors(dir + "/unet/part-1.safetensors", a).ok());
  REQUIRE(SaveSafetensors(dir + "/unet/part-2.safetensors", b).ok());
  REQUIRE(WriteFileDurable(dir + "/unet/diffusion_pytorch_model.safetensors.index.json",
                           Json{{"metadata", Json::object()}, {"weight_map", map}}.dump())
              .ok());
  REQUIRE(std::remove(unet.c_str()) == 0);
  Result<DiffusersModel> m = LoadDiffusersModel(dir);
  REQUIRE(m.ok());
  REQUIRE(m->denoiser_weights.size() == w->size());
  for (const auto& [k, t] : *w) {
    const torch::Tensor& got = m->denoiser_weights.at(k);
    CHECK(got.scalar_type() == torch::kFloat32);
    CHECK(torch::allclose(got, t, 1e-2, 1e-2));
  }
}

TEST_CASE("a diffusers folder with a missing or bad file is refused naming it", "[models]") {
  TempDir tmp;
  auto fresh = [&](const std::string& name, bool sdxl = false) {
    std::string dir = tmp / name;
    REQUIRE(WriteTinyDiffusersModel(dir, sdxl, 1).ok());
    return dir;
  };
  CHECK(ErrorOf(tmp / "nope") == tmp / "nope" + ": missing (not a folder)");

  std::string d = fresh("no-unet");
  gleaner::train::testing::RemoveTree(d + "/unet");
  CHECK(ErrorOf(d) == d + "/unet: missing (not a folder)");

  d = fresh("no-merges");
  REQUIRE(std::remove((d + "/tokenizer/merges.txt").c_str()) == 0);
  CHECK(ErrorOf(d) == d + "/tokenizer/merges.txt: missing");

  d = fresh("no-tokenizer-2", true);
  gleaner::train::testing::RemoveTree(d + "/tokenizer_2");
  CHECK(ErrorOf(d) == d + "/tokenizer_2: missing (not a folder)");

  d = fresh("no-index");
  REQUIRE(std::remove((d + "/model_index.json").c_str()) == 0);
  CHECK(ErrorOf(d) == d + "/model_index.json: missing");

  d = fresh("bad-unet-config");
  REQUIRE(WriteFileDurable(d + "/unet/config.json", "{\"block_out_channels\": [").ok());
  CHECK(ErrorOf(d).find(d + "/unet/config.json: ") == 0);

  d = fresh("no-unet-weights");
  REQUIRE(std::remove((d + "/unet/diffusion_pytorch_model.safetensors").c_str()) == 0);
  CHECK(ErrorOf(d) == d + "/unet: no diffusion_pytorch_model.safetensors (nor "
                          "diffusion_pytorch_model.safetensors.index.json, nor an .fp16 variant)");
  DiffusersLoadOptions no_unet;
  no_unet.denoiser = false;
  CHECK(LoadDiffusersModel(d, no_unet).ok());

  d = fresh("truncated-vae");
  const std::string vae = d + "/vae/diffusion_pytorch_model.safetensors";
  Result<std::string> bytes = ReadFile(vae);
  REQUIRE(bytes.ok());
  REQUIRE(WriteFileDurable(vae, bytes->substr(0, bytes->size() / 2)).ok());
  CHECK(ErrorOf(d).find(vae + ": ") == 0);

  d = fresh("wrong-encoder");
  Json te = *ParseJson(*ReadFile(d + "/text_encoder/config.json"));
  te["hidden_size"] = 48;
  REQUIRE(WriteFileDurable(d + "/text_encoder/config.json", te.dump()).ok());
  CHECK(ErrorOf(d) == d + "/text_encoder/config.json: hidden_size 48 but " + d +
                          "/unet/config.json has cross_attention_dim 32");

  d = fresh("no-scheduler");
  gleaner::train::testing::RemoveTree(d + "/scheduler");
  CHECK(ErrorOf(d) == d + "/scheduler/scheduler_config.json: missing");
}

// FLUX.1: the folder make-model --flux writes loads with T5 and CLIP; the same transformer as one
// single-file checkpoint (the original layout, no config.json) loads to the same config and
// diffusers weights; what is not such a file is refused naming it.
TEST_CASE("a tiny FLUX folder loads, also with a single-file transformer", "[models][flux]") {
  TempDir tmp;
  const std::string dir = tmp / "flux";
  REQUIRE(WriteTinyFluxModel(dir, 3).ok());
  Result<DiffusersModel> m = LoadDiffusersModel(dir);
  INFO((m.ok() ? "" : m.status().message()));
  REQUIRE(m.ok());
  CHECK(m->flux());
  CHECK_FALSE(m->sdxl());
  REQUIRE(m->t5.has_value());
  REQUIRE(m->t5->model != nullptr);
  REQUIRE(m->text.size() == 1);
  CHECK(m->denoiser_shape().guidance);
  const flux::FluxConfig config = std::get<flux::FluxConfig>(m->denoiser_config);

  const std::string single = tmp / "flux-single";
  REQUIRE(WriteTinyFluxModel(single, 3).ok());
  Result<TensorMap> bfl = flux::SingleFileFromDiffusers(m->denoiser_weights, config);
  REQUIRE(bfl.ok());
  REQUIRE(std::remove((single + "/transformer/config.json").c_str()) == 0);
  REQUIRE(std::remove((single + "/transformer/diffusion_pytorch_model.safetensors").c_str()) == 0);
  REQUIRE(SaveSafetensors(single + "/transformer/flux1-tiny.safetensors", *bfl).ok());
  Result<DiffusersModel> s = LoadDiffusersModel(single);
  INFO((s.ok() ? "" : s.status().message()));
  REQUIRE(s.ok());
  CHECK(flux::FluxConfigToJson(std::get<flux::FluxConfig>(s->denoiser_config)) ==
        flux::FluxConfigToJson(config));
  REQUIRE(s->denoiser_weights.size() == m->denoiser_weights.size());
  for (const auto& [k, t] : m->denoiser_weights) {
    INFO(k);
    REQUIRE(s->denoiser_weights.count(k));
    CHECK(torch::equal(s->denoiser_weights.at(k), t));
  }

  REQUIRE(
      SaveSafetensors(single + "/transformer/flux1-tiny.safetensors", {{"x", torch::zeros({2})}})
          .ok());
  Result<DiffusersModel> bad = LoadDiffusersModel(single);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("not a FLUX single-file checkpoint") != std::string::npos);
}
