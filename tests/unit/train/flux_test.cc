// FLUX.1 transformer tests: equivalence with diffusers' FluxTransformer2DModel (flux-ref-a:
// output, the single-file layout, LoRA output and gradients), LoRA file namings, config checks,
// latent packing, and `gleaner-train forward` on a FLUX config.
#include "agent/train/models/flux/flux_config.h"
#include "agent/train/models/flux/flux_denoiser.h"
#include "agent/train/models/flux/flux_lora.h"
#include "agent/train/models/flux/flux_packing.h"
#include "agent/train/models/flux/flux_single_file.h"
#include "agent/train/models/flux/flux_transformer.h"
#include "agent/train/models/loader/denoisers.h"
#include "agent/train/nn/torch_compat.h"
#include "ref_test_util.h"
#include "shared/safetensors.h"
#include "train_test_util.h"  // Catch2, via the CHECK fix-up

using namespace gleaner;
using namespace gleaner::train::testing;

namespace {

#define SKIP_WITHOUT_FLUX_FIXTURE(dir)                                            \
  std::string dir = ::gleaner::train::testing::FixtureDir("flux-ref-a");          \
  if (dir.empty()) {                                                              \
    GLEANER_SKIP("fixtures not found under " GLEANER_FIXTURES_DIR "/flux-ref-a"); \
  }

flux::FluxConfig MustFluxConfig(const std::string& path) {
  Result<flux::FluxConfig> c = flux::ParseFluxConfig(MustJson(path));
  REQUIRE(c.ok());
  return *c;
}

struct FluxFixture {
  std::shared_ptr<flux::FluxDenoiser> denoiser;
  TensorMap inputs;
  flux::FluxTransformer& net() { return denoiser->transformer(); }
  torch::Tensor Forward() {
    const TensorMap& i = inputs;
    return net().forward(i.at("hidden_states"), i.at("encoder_hidden_states"),
                         i.at("pooled_projections"), i.at("timestep"), i.at("img_ids"),
                         i.at("txt_ids"), i.count("guidance") ? i.at("guidance") : torch::Tensor());
  }
};

FluxFixture LoadFlux(const std::string& dir, const TensorMap& weights) {
  FluxFixture f;
  Result<std::shared_ptr<flux::FluxDenoiser>> d =
      flux::BuildFluxDenoiser(MustFluxConfig(dir + "/config.json"), weights, BasePlacement{});
  if (!d.ok()) FAIL(d.status().ToString());
  f.denoiser = *d;
  f.net().eval();
  f.inputs = MustLoad(dir + "/inputs.safetensors");
  return f;
}

FluxFixture LoadFlux(const std::string& dir) {
  return LoadFlux(dir, MustLoad(dir + "/weights.safetensors"));
}

}  // namespace

TEST_CASE("FLUX transformer forward matches the diffusers reference", "[flux][fixture]") {
  SKIP_WITHOUT_FLUX_FIXTURE(dir);
  FluxFixture f = LoadFlux(dir);
  torch::NoGradGuard no_grad;
  CheckClose("sample", f.Forward(), MustLoad(dir + "/output.safetensors").at("sample"), 1e-4, 1e-5);
}

TEST_CASE("FLUX single-file layout: detected, config inferred, converted both ways",
          "[flux][fixture]") {
  SKIP_WITHOUT_FLUX_FIXTURE(dir);
  TensorMap bfl = MustLoad(dir + "/weights_bfl.safetensors");
  TensorMap diffusers = MustLoad(dir + "/weights.safetensors");
  CHECK(flux::IsFluxSingleFile(bfl));
  CHECK_FALSE(flux::IsFluxSingleFile(diffusers));
  Result<flux::FluxConfig> inferred = flux::InferFluxConfig(bfl);
  REQUIRE(inferred.ok());
  CHECK(flux::FluxConfigToJson(*inferred) ==
        flux::FluxConfigToJson(MustFluxConfig(dir + "/config.json")));
  Result<TensorMap> conv = flux::DiffusersFromSingleFile(bfl);
  REQUIRE(conv.ok());
  REQUIRE(conv->size() == diffusers.size());
  for (const auto& [k, v] : diffusers) {
    INFO(k);
    REQUIRE(conv->count(k));
    CHECK(torch::equal(conv->at(k), v));
  }
  // Without the prefix too, and back.
  Result<TensorMap> back = flux::SingleFileFromDiffusers(diffusers, *inferred, /*prefix=*/false);
  REQUIRE(back.ok());
  CHECK(back->size() == bfl.size());
  CHECK(flux::IsFluxSingleFile(*back));
  Result<TensorMap> again = flux::DiffusersFromSingleFile(*back);
  REQUIRE(again.ok());
  for (const auto& [k, v] : diffusers) CHECK(torch::equal(again->at(k), v));
  // The model built from the single file gives the reference output.
  FluxFixture f = LoadFlux(dir, *conv);
  torch::NoGradGuard no_grad;
  CheckClose("sample (single file)", f.Forward(),
             MustLoad(dir + "/output.safetensors").at("sample"), 1e-4, 1e-5);
}

TEST_CASE("FLUX single file with missing blocks or keys: one line naming them", "[flux][fixture]") {
  SKIP_WITHOUT_FLUX_FIXTURE(dir);
  TensorMap bfl = MustLoad(dir + "/weights_bfl.safetensors");
  TensorMap no_block = bfl;
  for (auto it = no_block.begin(); it != no_block.end();) {
    it = it->first.find("double_blocks.0.") != std::string::npos ? no_block.erase(it) : ++it;
  }
  Result<flux::FluxConfig> c = flux::InferFluxConfig(no_block);
  REQUIRE_FALSE(c.ok());
  CHECK(c.status().message().find("missing blocks double_blocks.0") != std::string::npos);
  TensorMap no_key = bfl;
  no_key.erase("model.diffusion_model.single_blocks.1.linear2.weight");
  Result<TensorMap> conv = flux::DiffusersFromSingleFile(no_key);
  REQUIRE_FALSE(conv.ok());
  CHECK(conv.status().message().find("single_blocks.1.linear2.weight") != std::string::npos);
  TensorMap extra = bfl;
  extra["model.diffusion_model.double_blocks.0.img_attn.extra"] = torch::zeros({1});
  conv = flux::DiffusersFromSingleFile(extra);
  REQUIRE_FALSE(conv.ok());
  CHECK(conv.status().message().find("unexpected key") != std::string::npos);
}

TEST_CASE("FLUX LoRA forward and gradients match the reference, with and without checkpointing",
          "[flux][fixture]") {
  SKIP_WITHOUT_FLUX_FIXTURE(dir);
  torch::Tensor ref = MustLoad(dir + "/lora/output.safetensors").at("sample");
  std::map<std::string, std::string> meta;
  TensorMap grads = MustLoad(dir + "/lora/grad.safetensors", &meta);
  const double ref_loss = std::stod(meta.at("loss"));
  for (bool ckpt : {false, true}) {
    INFO("gradient checkpointing " << ckpt);
    FluxFixture f = LoadFlux(dir);
    f.denoiser->SetGradientCheckpointing(ckpt);
    Result<DenoiserLora> lora = DenoiserLora::Load(*f.denoiser, dir + "/lora/lora.safetensors");
    REQUIRE(lora.ok());
    CHECK(lora->size() == 30);
    CHECK(lora->rank() == 4);
    CHECK(lora->alpha() == 4.0);
    torch::Tensor y = f.Forward();
    CheckClose("LoRA sample", y.detach(), ref, 1e-4, 1e-5);
    torch::Tensor loss = (y * f.inputs.at("R")).sum();
    loss.backward();
    CHECK(loss.item<double>() == Approx(ref_loss).epsilon(1e-5));
    TensorMap got = lora->PeftGradients();
    REQUIRE(got.size() == grads.size());
    for (const auto& [k, v] : grads) {
      INFO(k);
      REQUIRE(got.count(k));
      CHECK(RelL2(got.at(k), v) <= 5e-5);
      CHECK(MaxAbs(got.at(k), v) <= 1e-4);
    }
  }
}

TEST_CASE(
    "FLUX fresh LoRA: the fixture's names for the default targets, every block Linear "
    "for all",
    "[flux][fixture]") {
  SKIP_WITHOUT_FLUX_FIXTURE(dir);
  FluxFixture f = LoadFlux(dir);
  Result<DenoiserLora> lora =
      DenoiserLora::Attach(*f.denoiser, 4, 4.0, at::detail::createCPUGenerator(1));
  REQUIRE(lora.ok());
  CheckSameKeysAndShapes(lora->PeftTensors(), MustLoad(dir + "/lora/lora.safetensors"));
  Json adapter = MustJson(dir + "/lora/adapter_config.json");
  CHECK(adapter["adapted"].size() == lora->size());
  FluxFixture g = LoadFlux(dir);
  g.denoiser->set_lora_targets(flux::FluxLoraTargets::kAll);
  Result<DenoiserLora> all =
      DenoiserLora::Attach(*g.denoiser, 4, 4.0, at::detail::createCPUGenerator(1));
  REQUIRE(all.ok());
  // 2 double blocks x 14 Linears + 2 single blocks x 6.
  CHECK(all->size() == 2 * 14 + 2 * 6);
  CHECK(all->PeftTensors().count("transformer.single_transformer_blocks.1.proj_mlp.lora_A.weight"));
  CHECK(flux::ParseFluxLoraTargets("all").ok());
  CHECK_FALSE(flux::ParseFluxLoraTargets("attn").ok());
}

TEST_CASE("FLUX config: every field checked, round trip, bad values name the field", "[flux]") {
  flux::FluxConfig tiny = flux::TinyFluxConfig();
  Result<flux::FluxConfig> back = flux::ParseFluxConfig(flux::FluxConfigToJson(tiny));
  REQUIRE(back.ok());
  CHECK(flux::FluxConfigToJson(*back) == flux::FluxConfigToJson(tiny));
  Json j = flux::FluxConfigToJson(tiny);
  CHECK(flux::IsFluxConfig(j));
  j["out_channels"] = nullptr;
  REQUIRE(flux::ParseFluxConfig(j).ok());
  CHECK(flux::ParseFluxConfig(j)->out_channels == tiny.in_channels);
  for (const Json& bad : SpoiledConfigs(flux::FluxConfigToJson(tiny))) {
    Result<flux::FluxConfig> r = flux::ParseFluxConfig(bad);
    if (r.ok()) continue;  // e.g. null = default, or a value still in range
    CHECK(r.status().message().find("config.") != std::string::npos);
  }
  Json axes = flux::FluxConfigToJson(tiny);
  axes["axes_dims_rope"] = Json::array({4, 4, 4});
  Result<flux::FluxConfig> r = flux::ParseFluxConfig(axes);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("config.axes_dims_rope") != std::string::npos);
  Json heads = flux::FluxConfigToJson(tiny);
  heads["num_attention_heads"] = "2";
  r = flux::ParseFluxConfig(heads);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("config.num_attention_heads") != std::string::npos);
}

TEST_CASE("FLUX latent packing: 2x2 patches, row-major ids, exact round trip", "[flux]") {
  torch::Tensor x = torch::arange(2 * 3 * 4 * 6, torch::kFloat32).reshape({2, 3, 4, 6});
  torch::Tensor p = flux::PackLatents(x);
  REQUIRE(p.sizes() == torch::IntArrayRef({2, 6, 12}));
  // Token 1 is patch (row 0, col 1): channel 0's 2x2 values first.
  CHECK(p[0][1][0].item<float>() == x[0][0][0][2].item<float>());
  CHECK(p[0][1][1].item<float>() == x[0][0][0][3].item<float>());
  CHECK(p[0][1][2].item<float>() == x[0][0][1][2].item<float>());
  CHECK(p[0][1][4].item<float>() == x[0][1][0][2].item<float>());
  CHECK(torch::equal(flux::UnpackLatents(p, 4, 6), x));
  torch::Tensor ids = flux::LatentImageIds(2, 3);
  REQUIRE(ids.sizes() == torch::IntArrayRef({6, 3}));
  CHECK(ids[4][0].item<float>() == 0);
  CHECK(ids[4][1].item<float>() == 1);
  CHECK(ids[4][2].item<float>() == 1);
}

TEST_CASE("FLUX denoiser: registered family, shape, packed forward", "[flux]") {
  flux::FluxConfig c = flux::TinyFluxConfig();
  models::DenoiserConfig dc = c;
  DenoiserShape s = models::ShapeOf(dc);
  CHECK(s.latent_channels == 4);
  CHECK(s.context_dim == 32);
  CHECK(s.pooled_dim == 24);
  CHECK(s.guidance);
  Result<std::shared_ptr<Denoiser>> d =
      models::BuildDenoiser(dc, flux::RandomFluxWeights(c, 7), BasePlacement{});
  REQUIRE(d.ok());
  CHECK((*d)->family() == "flux");
  CHECK((*d)->objective() == ObjectiveKind::kFlowMatch);
  torch::manual_seed(3);
  Conditioning cond;
  cond.text = torch::randn({2, 5, 32});
  cond.pooled = torch::randn({2, 24});
  cond.guidance = torch::tensor({3.5f, 1.0f});
  torch::Tensor x = torch::randn({2, 4, 4, 6});
  torch::NoGradGuard no_grad;
  torch::Tensor y = (*d)->Forward(x, torch::tensor({0.5f, 0.9f}), cond);
  CHECK(y.sizes() == x.sizes());
  // The same as the transformer on the packed tokens.
  auto* fd = dynamic_cast<flux::FluxDenoiser*>(d->get());
  REQUIRE(fd != nullptr);
  torch::Tensor tokens = fd->transformer().forward(
      flux::PackLatents(x), cond.text, cond.pooled, torch::tensor({0.5f, 0.9f}),
      flux::LatentImageIds(2, 3), torch::zeros({5, 3}), cond.guidance);
  CHECK(torch::allclose(flux::UnpackLatents(tokens, 4, 6), y));
}

namespace {

// Merges every adapter of a kohya file into single-file weights as kohya's and ComfyUI's loaders
// apply them: W += (alpha / rank) up @ down.
TensorMap MergeKohya(TensorMap bfl, const TensorMap& kohya) {
  for (const auto& [key, down] : kohya) {
    const std::string suffix = ".lora_down.weight";
    if (key.size() < suffix.size() ||
        key.compare(key.size() - suffix.size(), suffix.size(), suffix) != 0) {
      continue;
    }
    std::string stem = key.substr(0, key.size() - suffix.size());
    torch::Tensor up = kohya.at(stem + ".lora_up.weight");
    double alpha = kohya.count(stem + ".alpha") ? kohya.at(stem + ".alpha").item<double>()
                                                : double(down.size(0));
    // lora_unet_double_blocks_0_img_attn_qkv -> double_blocks.0.img_attn.qkv
    std::string path = stem.substr(std::string("lora_unet_").size());
    std::string module;
    for (const auto& [k, v] : bfl) {
      std::string m = k.substr(std::string("model.diffusion_model.").size());
      if (m.size() < 7 || m.compare(m.size() - 7, 7, ".weight") != 0) continue;
      m = m.substr(0, m.size() - 7);
      std::string flat = m;
      for (char& ch : flat) ch = ch == '.' ? '_' : ch;
      if (flat == path) module = m;
    }
    INFO(stem);
    REQUIRE_FALSE(module.empty());
    torch::Tensor& w = bfl.at("model.diffusion_model." + module + ".weight");
    w = w + (alpha / double(down.size(0))) * torch::mm(up, down);
  }
  return bfl;
}

}  // namespace

TEST_CASE("FLUX kohya LoRA: fused qkv names, merged as kohya/ComfyUI do, read back exactly",
          "[flux][fixture]") {
  SKIP_WITHOUT_FLUX_FIXTURE(dir);
  torch::Tensor ref = MustLoad(dir + "/lora/output.safetensors").at("sample");
  FluxFixture f = LoadFlux(dir);
  Result<DenoiserLora> peft = DenoiserLora::Load(*f.denoiser, dir + "/lora/lora.safetensors");
  REQUIRE(peft.ok());
  TensorMap kohya = peft->KohyaTensors();
  const int64_t inner = 32;
  REQUIRE(kohya.count("lora_unet_double_blocks_0_img_attn_qkv.lora_down.weight"));
  CHECK(kohya.at("lora_unet_double_blocks_0_img_attn_qkv.lora_down.weight").sizes() ==
        torch::IntArrayRef({12, inner}));
  CHECK(kohya.at("lora_unet_double_blocks_0_img_attn_qkv.lora_up.weight").sizes() ==
        torch::IntArrayRef({3 * inner, 12}));
  CHECK(kohya.at("lora_unet_double_blocks_0_img_attn_qkv.alpha").item<float>() == 12.0f);
  CHECK(kohya.at("lora_unet_double_blocks_1_txt_attn_proj.alpha").item<float>() == 4.0f);
  CHECK(kohya.count("lora_unet_double_blocks_1_txt_mlp_2.lora_up.weight"));
  // The single blocks' linear1 fuses q, k, v and the (not adapted) MLP input: zero rows there.
  torch::Tensor up1 = kohya.at("lora_unet_single_blocks_1_linear1.lora_up.weight");
  CHECK(up1.sizes() == torch::IntArrayRef({3 * inner + 4 * inner, 12}));
  CHECK(up1.narrow(0, 3 * inner, 4 * inner).abs().max().item<float>() == 0.0f);
  CHECK_FALSE(kohya.count("lora_unet_single_blocks_0_linear2.lora_up.weight"));
  // Merged into the single file as kohya/ComfyUI apply it: the reference LoRA output.
  TensorMap merged = MergeKohya(MustLoad(dir + "/weights_bfl.safetensors"), kohya);
  Result<TensorMap> conv = flux::DiffusersFromSingleFile(merged);
  REQUIRE(conv.ok());
  {
    FluxFixture m = LoadFlux(dir, *conv);
    torch::NoGradGuard no_grad;
    CheckClose("kohya merged", m.Forward(), ref, 1e-4, 1e-5);
  }
  // Read back: the same adapters, rank and alpha.
  TempDir tmp;
  REQUIRE(SaveSafetensors(tmp / "kohya.safetensors", kohya).ok());
  FluxFixture g = LoadFlux(dir);
  Result<DenoiserLora> back = DenoiserLora::Load(*g.denoiser, tmp / "kohya.safetensors");
  if (!back.ok()) FAIL(back.status().ToString());
  CHECK(back->size() == 30);
  CHECK(back->rank() == 4);
  CHECK(back->alpha() == 4.0);
  TensorMap p0 = peft->PeftTensors(), p1 = back->PeftTensors();
  for (const auto& [k, v] : p0) CHECK(torch::equal(p1.at(k), v));
  torch::NoGradGuard no_grad;
  CheckClose("kohya read back", g.Forward(), ref, 1e-4, 1e-5);
}

TEST_CASE("FLUX kohya LoRA trained on the fused layers (every Linear) loads as merged",
          "[flux][fixture]") {
  SKIP_WITHOUT_FLUX_FIXTURE(dir);
  flux::FluxConfig c = MustFluxConfig(dir + "/config.json");
  torch::manual_seed(11);
  TensorMap bfl = MustLoad(dir + "/weights_bfl.safetensors");
  TensorMap kohya;
  for (const flux::BflModule& m : flux::FluxBlockModules(c)) {
    torch::Tensor w = bfl.at("model.diffusion_model." + m.bfl + ".weight");
    std::string stem = "lora_unet_" + m.bfl;
    for (char& ch : stem) ch = ch == '.' ? '_' : ch;
    kohya[stem + ".lora_down.weight"] = torch::randn({3, w.size(1)}) * 0.2;
    kohya[stem + ".lora_up.weight"] = torch::randn({w.size(0), 3}) * 0.2;
    kohya[stem + ".alpha"] = torch::tensor(1.5f).reshape({});
  }
  Result<TensorMap> conv = flux::DiffusersFromSingleFile(MergeKohya(bfl, kohya));
  REQUIRE(conv.ok());
  torch::Tensor want;
  {
    FluxFixture m = LoadFlux(dir, *conv);
    torch::NoGradGuard no_grad;
    want = m.Forward();
  }
  TempDir tmp;
  REQUIRE(SaveSafetensors(tmp / "k.safetensors", kohya).ok());
  FluxFixture g = LoadFlux(dir);
  Result<DenoiserLora> lora = DenoiserLora::Load(*g.denoiser, tmp / "k.safetensors");
  if (!lora.ok()) FAIL(lora.status().ToString());
  CHECK(lora->size() == 2 * 14 + 2 * 6);
  CHECK(lora->rank() == 3);
  CHECK(lora->alpha() == 1.5);
  torch::NoGradGuard no_grad;
  CheckClose("kohya fused file", g.Forward(), want, 1e-4, 1e-5);
}

TEST_CASE("fp8 (F8_E4M3) safetensors: loaded where libtorch has the type, else one clear line",
          "[flux]") {
  // 1.0, -2.0, 0.5 in float8_e4m3fn: 0x38, 0xC0, 0x30.
  const std::string bytes("\x38\xC0\x30", 3);
  std::map<std::string, safetensors::TensorToWrite> t = {
      {"model.diffusion_model.img_in.weight", {safetensors::DType::kF8E4M3, {3}, bytes}}};
  Result<std::string> file = safetensors::Serialize(t);
  REQUIRE(file.ok());
  Result<TensorMap> got = DecodeSafetensors(*file, "flux1-dev-fp8.safetensors", nullptr);
  if (train::kHasFp8) {
    REQUIRE(got.ok());
    torch::Tensor w = got->at("model.diffusion_model.img_in.weight");
    CHECK(train::IsFp8(w));
    CHECK(torch::equal(w.to(torch::kFloat32), torch::tensor({1.0f, -2.0f, 0.5f})));
  } else {
    REQUIRE_FALSE(got.ok());
    CHECK(got.status().message() ==
          "flux1-dev-fp8.safetensors: tensor model.diffusion_model.img_in.weight is "
          "float8_e4m3fn (F8_E4M3), which needs libtorch 2.1 or newer (this is " TORCH_VERSION
          "); use a bf16 or fp16 checkpoint");
  }
}

TEST_CASE("FLUX base in bf16 under autocast stays close to the fp32 reference", "[flux][fixture]") {
  SKIP_WITHOUT_FLUX_FIXTURE(dir);
  BasePlacement bf16;
  bf16.dtype = torch::kBFloat16;
  Result<std::shared_ptr<flux::FluxDenoiser>> d = flux::BuildFluxDenoiser(
      MustFluxConfig(dir + "/config.json"), MustLoad(dir + "/weights.safetensors"), bf16);
  REQUIRE(d.ok());
  for (const auto& p : (*d)->module().parameters()) {
    CHECK(p.scalar_type() == torch::kBFloat16);
    CHECK_FALSE(p.requires_grad());
  }
  FluxFixture f;
  f.denoiser = *d;
  f.inputs = MustLoad(dir + "/inputs.safetensors");
  torch::NoGradGuard no_grad;
  train::AutocastScope autocast(torch::kCPU, torch::kBFloat16);
  torch::Tensor y = f.Forward().to(torch::kFloat32);
  torch::Tensor ref = MustLoad(dir + "/output.safetensors").at("sample");
  double rel = RelL2(y, ref);
  WARN("bf16 rel-L2 " << rel);
  CHECK(rel < 0.05);
}

TEST_CASE("gleaner-train forward runs FLUX: diffusers or single-file weights, LoRA gradients",
          "[flux][fixture]") {
  SKIP_WITHOUT_FLUX_FIXTURE(dir);
  TempDir tmp;
  // A FluxTransformer2DModel config picks FLUX; R from the inputs file.
  REQUIRE(RunBin({"forward", "--config", dir + "/config.json", "--weights",
                  dir + "/weights.safetensors", "--inputs", dir + "/inputs.safetensors", "--lora",
                  dir + "/lora/lora.safetensors", "--grad-weights", dir + "/inputs.safetensors",
                  "--out", tmp / "lora_out.safetensors"}) == 0);
  std::map<std::string, std::string> meta;
  TensorMap o = MustLoad(tmp / "lora_out.safetensors", &meta);
  CHECK(RelL2(o.at("sample"), MustLoad(dir + "/lora/output.safetensors").at("sample")) <= 1e-5);
  for (const auto& [k, v] : MustLoad(dir + "/lora/grad.safetensors")) {
    INFO(k);
    REQUIRE(o.count(k));
    CHECK(RelL2(o.at(k), v) <= 5e-5);
  }
  CHECK(meta.count("loss_value"));
  // A single file without --config: the config is inferred.
  REQUIRE(RunBin({"forward", "--weights", dir + "/weights_bfl.safetensors", "--inputs",
                  dir + "/inputs.safetensors", "--out", tmp / "bfl_out.safetensors"}) == 0);
  CHECK(RelL2(MustLoad(tmp / "bfl_out.safetensors").at("sample"),
              MustLoad(dir + "/output.safetensors").at("sample")) <= 1e-5);
  // diffusers weights without a config: one line saying so.
  text::testing::CliRun run =
      RunTrainCli({"forward", "--weights", dir + "/weights.safetensors", "--inputs",
                   dir + "/inputs.safetensors", "--out", tmp / "x.safetensors"});
  CHECK(run.code != 0);
  CHECK(run.err.find("not a FLUX single file, so --config is needed") != std::string::npos);
}
