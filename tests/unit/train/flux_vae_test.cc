// AutoencoderKL as FLUX.1 configures it (16 latent channels, no quant convs, shift_factor)
// against diffusers' reference sets (flux-vae-ref-*): every output tensor, through the library
// and through `gleaner-train vae`, the shifted scaling both ways, and the configs and weights
// that do not fit.
#include <algorithm>

#include "agent/train/models/vae/image_latents.h"
#include "ref_test_util.h"  // Catch2, via the CHECK fix-up

using namespace gleaner;
using namespace gleaner::train::testing;
using namespace gleaner::train::vae;

namespace {

VaeConfig MustFluxVaeConfig(const Json& j) {
  Result<VaeConfig> c = ParseVaeConfig(j);
  INFO(c.status().ToString());
  REQUIRE(c.ok());
  return *c;
}

// README bounds (as vae-ref-a): max |d| <= 1e-4; rel-L2 <= 1e-5 (encoder outputs and the
// scaled mean), <= 5e-5 (decoded). Every reference tensor must be among `got`.
void CheckAllOutputs(const TensorMap& got, const TensorMap& ref) {
  for (const auto& [name, want] : ref) {
    INFO(name);
    REQUIRE(got.count(name) == 1);
    bool decoded = name.rfind("decoded", 0) == 0;
    CheckClose(name, got.at(name), want, 1e-4, decoded ? 5e-5 : 1e-5);
  }
}

}  // namespace

TEST_CASE("FLUX VAE: every output of the reference set", "[vae][flux][fixture]") {
  FIXTURE_SETS(sets, "flux-vae", "weights.safetensors");
  for (const std::string& dir : sets) {
    INFO(dir);
    VaeConfig c = MustFluxVaeConfig(MustJson(dir + "/config.json"));
    CHECK(c.latent_channels == 16);
    CHECK_FALSE(c.use_quant_conv);
    CHECK_FALSE(c.use_post_quant_conv);
    REQUIRE(c.shift_factor.has_value());
    AutoencoderKL vae(c);
    for (const auto& item : vae.named_parameters()) {
      CHECK(item.key().find("quant_conv") == std::string::npos);
    }
    Status loaded = LoadVaeWeights(vae, MustLoad(dir + "/weights.safetensors"));
    INFO(loaded.ToString());
    REQUIRE(loaded.ok());
    vae.eval();
    TensorMap in = MustLoad(dir + "/inputs.safetensors"),
              ref = MustLoad(dir + "/outputs.safetensors");
    TensorMap got;
    LatentDist d = vae.Encode(in.at("image"));
    got["mean"] = d.mean;
    got["logvar"] = d.logvar;
    got["std"] = d.std;
    // Training: (mean - shift) * scale; sampling: decode(latent / scale + shift).
    got["scaled_mean"] = ScaleLatents(c, d.mean);
    got["decoded_scaled"] = vae.Decode(UnscaleLatents(c, in.at("latent")));
    got["decoded_mean"] = vae.Decode(d.mean);
    got["decoded"] = vae.Decode(in.at("latent"));
    CHECK(got["mean"].size(1) == 16);
    CheckAllOutputs(got, ref);
    // The shift really is applied: without it the scaled mean is off by shift * scale.
    torch::Tensor unshifted = d.mean * c.scaling_factor;
    CHECK(MaxAbs(unshifted - got["scaled_mean"],
                 torch::zeros_like(unshifted) + *c.shift_factor * c.scaling_factor) < 1e-5);
    // The pipeline's round trip: the scaled latents unscale to the mean.
    CHECK(MaxAbs(UnscaleLatents(c, got["scaled_mean"]), d.mean) < 1e-5);
    // DecodeToImages applies the same unscaling as decoded_scaled.
    Result<torch::Tensor> u8 = DecodeToImages(vae, in.at("latent"));
    REQUIRE(u8.ok());
    CHECK((u8->to(torch::kInt32) - DecodedToU8(ref.at("decoded_scaled")).to(torch::kInt32))
              .abs()
              .max()
              .item<int>() <= 1);
  }
}

TEST_CASE("vae CLI writes every output of the FLUX VAE reference set",
          "[vae][flux][cli][fixture]") {
  FIXTURE_SETS(sets, "flux-vae", "weights.safetensors");
  TempDir tmp;
  for (const std::string& dir : sets) {
    INFO(dir);
    text::testing::CliRun r = RunTrainCli(
        {"vae", "--config", dir + "/config.json", "--weights", dir + "/weights.safetensors",
         "--inputs", dir + "/inputs.safetensors", "--seed", "3", "--out", tmp / "o.safetensors"});
    INFO(r.err);
    REQUIRE(r.code == 0);
    TensorMap got = MustLoad(tmp / "o.safetensors");
    CheckAllOutputs(got, MustLoad(dir + "/outputs.safetensors"));
    // latents = (sample - shift) * scale.
    VaeConfig c = MustFluxVaeConfig(MustJson(dir + "/config.json"));
    CHECK(torch::allclose(got.at("latents"),
                          (got.at("sample") - *c.shift_factor) * c.scaling_factor));
  }
}

TEST_CASE("FLUX VAE configs: shift_factor and the quant convs", "[vae][flux]") {
  Json base = {{"block_out_channels", {32, 32}},
               {"down_block_types", std::vector<std::string>(2, "DownEncoderBlock2D")},
               {"up_block_types", std::vector<std::string>(2, "UpDecoderBlock2D")},
               {"latent_channels", 16},
               {"scaling_factor", 0.5}};
  // No shift_factor key, or null (SD VAEs write it so): no shift.
  for (bool null_key : {false, true}) {
    Json j = base;
    if (null_key) j["shift_factor"] = nullptr;
    VaeConfig c = MustFluxVaeConfig(j);
    CHECK_FALSE(c.shift_factor.has_value());
    torch::Tensor z = torch::tensor({1.0f, -3.0f});
    CHECK(torch::equal(ScaleLatents(c, z), z * 0.5));
  }
  {
    Json j = base;
    j["shift_factor"] = -0.25;
    VaeConfig c = MustFluxVaeConfig(j);
    torch::Tensor z = torch::tensor({1.0f, -3.0f});
    CHECK(torch::allclose(ScaleLatents(c, z), torch::tensor({0.625f, -1.375f})));
    CHECK(torch::allclose(UnscaleLatents(c, ScaleLatents(c, z)), z));
  }
  for (const Json& bad : {Json("x"), Json(true), Json::array(), Json(1e300)}) {
    Json j = base;
    j["shift_factor"] = bad;
    Result<VaeConfig> r = ParseVaeConfig(j);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message().find("shift_factor") != std::string::npos);
  }
  // Quant convs follow the config: 2L -> 2L and L -> L 1x1 convs, or none.
  Json with = base;
  AutoencoderKL a(MustFluxVaeConfig(with));
  with["use_quant_conv"] = false;
  with["use_post_quant_conv"] = false;
  AutoencoderKL b(MustFluxVaeConfig(with));
  auto pa = a.named_parameters(), pb = b.named_parameters();
  REQUIRE(pa.contains("quant_conv.weight"));
  CHECK(pa["quant_conv.weight"].sizes() == torch::IntArrayRef({32, 32, 1, 1}));
  CHECK(pa["post_quant_conv.weight"].sizes() == torch::IntArrayRef({16, 16, 1, 1}));
  CHECK(pa.size() == pb.size() + 4);
  CHECK_FALSE(pb.contains("quant_conv.weight"));
  CHECK_FALSE(pb.contains("post_quant_conv.bias"));
}

TEST_CASE("FLUX VAE weights that do not fit the config are refused by name",
          "[vae][flux][fixture]") {
  FIXTURE_SETS(sets, "flux-vae", "weights.safetensors");
  const std::string dir = sets.front();
  Json cfg = MustJson(dir + "/config.json");
  TensorMap w = MustLoad(dir + "/weights.safetensors");
  {
    // The config asks for quant convs the FLUX weights do not have.
    Json j = cfg;
    j["use_quant_conv"] = true;
    AutoencoderKL m(MustFluxVaeConfig(j));
    Status s = LoadVaeWeights(m, w);
    CHECK(s.message().find("missing keys: quant_conv") != std::string::npos);
  }
  {
    // Weights with a quant conv for a config without one.
    TensorMap extra = w;
    extra["quant_conv.weight"] = torch::zeros({32, 32, 1, 1});
    AutoencoderKL m(MustFluxVaeConfig(cfg));
    Status s = LoadVaeWeights(m, extra);
    CHECK(s.message().find("unexpected keys: quant_conv.weight") != std::string::npos);
  }
  {
    // A 4-channel config on 16-channel weights: a shape mismatch, not a crash.
    Json j = cfg;
    j["latent_channels"] = 4;
    AutoencoderKL m(MustFluxVaeConfig(j));
    Status s = LoadVaeWeights(m, w);
    CHECK_FALSE(s.ok());
    CHECK(s.message().find("encoder.conv_out") != std::string::npos);
  }
  // The CLI: 4-channel latents for a 16-channel VAE, one line naming the shape.
  TempDir tmp;
  REQUIRE(SaveSafetensors(tmp / "in.st", {{"latent", torch::zeros({1, 4, 8, 8})}}).ok());
  text::testing::CliRun r = RunTrainCli({"vae", "--config", dir + "/config.json", "--weights",
                                         dir + "/weights.safetensors", "--inputs", tmp / "in.st",
                                         "--out", tmp / "o.safetensors"});
  INFO(r.err);
  CHECK(r.code == kExitFailed);
  CHECK(r.err.find("[B, 16, h, w]") != std::string::npos);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
}

TEST_CASE("spoiled FLUX VAE configs are answered, never crash", "[vae][flux][fixture]") {
  FIXTURE_SETS(sets, "flux-vae", "config.json");
  int ok = 0, refused = 0;
  for (const Json& c : SpoiledConfigs(MustJson(sets.front() + "/config.json"))) {
    Result<VaeConfig> r = ParseVaeConfig(c);
    if (r.ok()) {
      ++ok;
      CHECK(r->latent_channels >= 1);
    } else {
      ++refused;
      CHECK_FALSE(r.status().message().empty());
    }
  }
  CHECK(ok > 0);
  CHECK(refused > 0);
}
