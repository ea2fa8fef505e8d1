// AutoencoderKL: encoder moments and decoder output against diffusers' reference sets
// (vae-ref-*), old weight names, config variants and refusals, latent sampling, the pipeline's
// scaling and 8-bit output, and `gleaner-train vae`.
#include <cmath>

#include "agent/train/images/decode.h"
#include "agent/train/models/vae/image_latents.h"
#include "ref_test_util.h"  // Catch2, via the CHECK fix-up

using namespace gleaner;
using namespace gleaner::train::testing;
using namespace gleaner::train::vae;

namespace {

VaeConfig MustVaeConfig(const Json& j) {
  Result<VaeConfig> c = ParseVaeConfig(j);
  INFO(c.status().ToString());
  REQUIRE(c.ok());
  return *c;
}

std::shared_ptr<AutoencoderKL> MustModel(const VaeConfig& c, const TensorMap& weights) {
  auto m = std::make_shared<AutoencoderKL>(c);
  Status s = LoadVaeWeights(*m, weights);
  INFO(s.ToString());
  REQUIRE(s.ok());
  m->eval();
  return m;
}

// The reference sets' bounds: max |d| <= 1e-4; rel-L2 <= 1e-5 (moments), 5e-5 (decoded).
void CheckOutputs(const TensorMap& got, const TensorMap& ref) {
  for (const auto& [name, want] : ref) {
    if (!got.count(name)) continue;
    bool decoded = name.rfind("decoded", 0) == 0;
    CheckClose(name, got.at(name), want, 1e-4, decoded ? 5e-5 : 1e-5);
  }
}

int64_t ParamCount(torch::nn::Module& m) {
  int64_t n = 0;
  for (const auto& p : m.parameters()) n += p.numel();
  return n;
}

}  // namespace

TEST_CASE("VAE encoder and decoder match diffusers", "[vae][fixture]") {
  FIXTURE_SETS(sets, "vae", "weights.safetensors");
  for (const std::string& dir : sets) {
    INFO(dir);
    VaeConfig c = MustVaeConfig(MustJson(dir + "/config.json"));
    auto vae = MustModel(c, MustLoad(dir + "/weights.safetensors"));
    TensorMap in = MustLoad(dir + "/inputs.safetensors"),
              ref = MustLoad(dir + "/outputs.safetensors");
    TensorMap got;
    LatentDist d = vae->Encode(in.at("image"));
    got["mean"] = d.mean;
    got["logvar"] = d.logvar;
    got["std"] = d.std;
    got["decoded"] = vae->Decode(in.at("latent"));
    got["decoded_mean"] = vae->Decode(d.mean);
    CHECK(torch::GradMode::is_enabled());  // Encode/Decode leave autograd as they found it
    CHECK_FALSE(got["decoded"].requires_grad());
    CheckOutputs(got, ref);
    // 8-bit output: the same bytes as the reference's float output gives, but for values that
    // sit on a rounding boundary.
    torch::Tensor u8 = DecodedToU8(got["decoded"]), want = DecodedToU8(ref.at("decoded"));
    CHECK(u8.scalar_type() == torch::kUInt8);
    CHECK((u8.to(torch::kInt32) - want.to(torch::kInt32)).abs().max().item<int>() <= 1);
  }
}

TEST_CASE("VAE weights with the old attention names load to the same model", "[vae][fixture]") {
  FIXTURE_SETS(sets, "vae", "weights.safetensors");
  const std::string dir = sets.front();
  VaeConfig c = MustVaeConfig(MustJson(dir + "/config.json"));
  TensorMap w = MustLoad(dir + "/weights.safetensors"), old;
  const std::pair<std::string, std::string> names[] = {{".to_q.", ".query."},
                                                       {".to_k.", ".key."},
                                                       {".to_v.", ".value."},
                                                       {".to_out.0.", ".proj_attn."}};
  int renamed = 0;
  for (const auto& [k, v] : w) {
    std::string key = k;
    torch::Tensor t = v;
    for (const auto& [from, to] : names) {
      size_t at = key.find(from);
      if (key.find("mid_block.attentions.") != std::string::npos && at != std::string::npos) {
        key.replace(at, from.size(), to);
        // Some old checkpoints store these projections as 1x1 convolutions.
        if (t.dim() == 2 && renamed % 2 == 0) t = t.view({t.size(0), t.size(1), 1, 1});
        ++renamed;
      }
    }
    old[key] = t;
  }
  REQUIRE(renamed == 16);  // 4 projections x (weight, bias) x (encoder, decoder)
  auto a = MustModel(c, w), b = MustModel(c, old);
  torch::Tensor x = MustLoad(dir + "/inputs.safetensors").at("image");
  CHECK(torch::equal(a->Encode(x).mean, b->Encode(x).mean));
  old["encoder.mid_block.attentions.0.to_q.weight"] =
      w.at("encoder.mid_block.attentions.0.to_q.weight");
  Status both = LoadVaeWeights(*b, old);
  CHECK(both.message().find("old and the new name") != std::string::npos);
}

TEST_CASE("VAE configs: levels, optional parts, diffusers' parameter names", "[vae]") {
  // SD 1.x / SDXL VAE architecture: 83,653,863 parameters under diffusers' names.
  Json sd = {{"_class_name", "AutoencoderKL"},
             {"block_out_channels", {128, 256, 512, 512}},
             {"down_block_types", std::vector<std::string>(4, "DownEncoderBlock2D")},
             {"up_block_types", std::vector<std::string>(4, "UpDecoderBlock2D")},
             {"layers_per_block", 2},
             {"latent_channels", 4},
             {"norm_num_groups", 32},
             {"scaling_factor", 0.13025},
             {"force_upcast", false}};
  VaeConfig c = MustVaeConfig(sd);
  CHECK(c.spatial_factor() == 8);
  CHECK(c.scaling_factor == 0.13025);
  CHECK_FALSE(c.shift_factor.has_value());
  CHECK(VaeComputeDtype(c, true) == torch::kHalf);
  CHECK(VaeComputeDtype(c, false) == torch::kFloat32);
  {
    AutoencoderKL full(c);
    CHECK(ParamCount(full) == 83653863);
    auto params = full.named_parameters();
    for (const char* k : {"encoder.down_blocks.1.resnets.0.conv_shortcut.weight",
                          "encoder.down_blocks.2.downsamplers.0.conv.weight",
                          "encoder.mid_block.attentions.0.group_norm.weight",
                          "encoder.mid_block.attentions.0.to_out.0.bias",
                          "decoder.up_blocks.0.upsamplers.0.conv.weight",
                          "decoder.up_blocks.3.resnets.2.conv2.weight",
                          "decoder.up_blocks.2.resnets.0.conv_shortcut.weight", "quant_conv.weight",
                          "post_quant_conv.bias"}) {
      INFO(k);
      CHECK(params.find(k) != nullptr);
    }
    CHECK(params.find("encoder.down_blocks.3.downsamplers.0.conv.weight") == nullptr);
    CHECK(params.find("decoder.up_blocks.3.upsamplers.0.conv.weight") == nullptr);
  }
  // A small multi-level variant without quant convs or mid-block attention, odd shapes.
  Json small = {{"block_out_channels", {8, 16, 16}},
                {"down_block_types", std::vector<std::string>(3, "DownEncoderBlock2D")},
                {"up_block_types", std::vector<std::string>(3, "UpDecoderBlock2D")},
                {"layers_per_block", 2},
                {"latent_channels", 6},
                {"norm_num_groups", 4},
                {"shift_factor", 0.25},
                {"use_quant_conv", false},
                {"use_post_quant_conv", false},
                {"mid_block_add_attention", false}};
  VaeConfig s = MustVaeConfig(small);
  CHECK(VaeComputeDtype(s, true) == torch::kFloat32);  // force_upcast defaults to true
  torch::manual_seed(3);
  AutoencoderKL m(s);
  auto params = m.named_parameters();
  CHECK(params.find("quant_conv.weight") == nullptr);
  CHECK(params.find("post_quant_conv.weight") == nullptr);
  CHECK(params.find("encoder.mid_block.attentions.0.to_q.weight") == nullptr);
  torch::Tensor img = torch::rand({2, 3, 20, 12}) * 2 - 1;
  LatentDist d = m.Encode(img);
  CHECK(d.mean.sizes() == torch::IntArrayRef({2, 6, 5, 3}));
  CHECK(m.Decode(d.mean).sizes() == torch::IntArrayRef({2, 3, 20, 12}));
  // With a shift factor: latents = (z - shift) * scale, and back.
  torch::Tensor z = torch::randn({1, 6, 5, 3});
  CHECK(torch::allclose(ScaleLatents(s, z), (z - 0.25) * 0.18215));
  CHECK(torch::allclose(UnscaleLatents(s, ScaleLatents(s, z)), z, 1e-5, 1e-6));
  // Loading weights of another architecture names what does not fit.
  TensorMap w;
  for (const auto& p : AutoencoderKL(VaeConfig()).named_parameters()) w[p.key()] = p.value();
  Status st = LoadVaeWeights(m, w);
  CHECK(st.message().find("VAE weights: ") == 0);
}

TEST_CASE("VAE configs that name unsupported features are refused by name", "[vae]") {
  const std::pair<Json, const char*> bad[] = {
      {{{"_class_name", "AutoencoderTiny"}}, "AutoencoderTiny"},
      {{{"act_fn", "gelu"}}, "act_fn"},
      {{{"latents_mean", {0.1, 0.2, 0.3, 0.4}}}, "latents_mean"},
      {{{"latents_std", {1, 1, 1, 1}}}, "latents_std"},
      {{{"down_block_types", {"DownBlock2D"}}}, "DownBlock2D"},
      {{{"block_out_channels", {64, 128}}, {"down_block_types", {"DownEncoderBlock2D"}}},
       "down_block_types"},
      {{{"block_out_channels", {64, 128}}}, "down_block_types"},
      {{{"block_out_channels", {48}}}, "norm_num_groups"},
      {{{"layers_per_block", 0}}, "layers_per_block"},
      {{{"scaling_factor", "big"}}, "scaling_factor"},
      {{{"use_quant_conv", 1}}, "use_quant_conv"}};
  for (const auto& [config, name] : bad) {
    INFO(DumpJson(config));
    Result<VaeConfig> r = ParseVaeConfig(config);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message().find(name) != std::string::npos);
  }
  CHECK_FALSE(ParseVaeConfig(Json::array()).ok());
  CHECK(ParseVaeConfig(Json{{"act_fn", "swish"}}).ok());
}

TEST_CASE("spoiled VAE configs are answered, never crash", "[vae][fixture]") {
  FIXTURE_SETS(sets, "vae", "config.json");
  int ok = 0, refused = 0;
  for (const Json& c : SpoiledConfigs(MustJson(sets.front() + "/config.json"))) {
    Result<VaeConfig> r = ParseVaeConfig(c);
    if (r.ok()) {
      ++ok;
      CHECK(r->spatial_factor() >= 1);
    } else {
      ++refused;
      CHECK_FALSE(r.status().message().empty());
    }
  }
  CHECK(ok > 0);
  CHECK(refused > 0);
}

TEST_CASE("images and latents of the wrong shape give one clear error", "[vae]") {
  VaeConfig c =
      MustVaeConfig(Json{{"block_out_channels", {32, 32, 32}},
                         {"down_block_types", std::vector<std::string>(3, "DownEncoderBlock2D")},
                         {"up_block_types", std::vector<std::string>(3, "UpDecoderBlock2D")}});
  CHECK(CheckImages(c, torch::zeros({1, 3, 8, 12})).ok());
  CHECK(CheckImages(c, torch::zeros({1, 4, 8, 8})).message().find("3 channels") !=
        std::string::npos);
  // As diffusers, sizes that are not multiples of 4 encode (10 -> 5 -> 2); 3 is too small for
  // two downsamplings (3 -> 1).
  CHECK(CheckImages(c, torch::zeros({1, 3, 10, 8})).ok());
  CHECK(CheckImages(c, torch::zeros({1, 3, 4, 8})).ok());
  CHECK(CheckImages(c, torch::zeros({1, 3, 3, 8})).message().find("too small") !=
        std::string::npos);
  CHECK(CheckImages(c, torch::zeros({1, 3, 8, 0})).message().find("too small") !=
        std::string::npos);
  CHECK_FALSE(CheckImages(c, torch::zeros({3, 8, 8})).ok());
  CHECK_FALSE(CheckImages(c, torch::zeros({1, 3, 8, 8}, torch::kUInt8)).ok());
  CHECK_FALSE(CheckImages(c, torch::Tensor()).ok());
  CHECK(CheckLatents(c, torch::zeros({2, 4, 3, 5})).ok());
  CHECK(CheckLatents(c, torch::zeros({2, 3, 3, 5})).message().find("[B, 4, h, w]") !=
        std::string::npos);
  AutoencoderKL m(c);
  torch::Generator gen = at::detail::createCPUGenerator(0);
  CHECK(m.Encode(torch::zeros({1, 3, 10, 8})).mean.sizes() == torch::IntArrayRef({1, 4, 2, 2}));
  // Training images must decode back to their size.
  CHECK(EncodeToLatents(m, torch::zeros({1, 3, 10, 8}), gen)
            .status()
            .message()
            .find("multiples of 4") != std::string::npos);
  CHECK_FALSE(DecodeToImages(m, torch::zeros({1, 3, 2, 2})).ok());
  Result<torch::Tensor> img = DecodeToImages(m, torch::zeros({1, 4, 2, 3}));
  REQUIRE(img.ok());
  CHECK(img->sizes() == torch::IntArrayRef({1, 3, 8, 12}));
  CHECK(img->scalar_type() == torch::kUInt8);
}

TEST_CASE("latent_dist.sample() is deterministic for a seed and N(mean, std^2)", "[vae]") {
  LatentDist d;
  d.mean = torch::full({8, 4, 32, 32}, 0.5);
  d.logvar = torch::full({8, 4, 32, 32}, std::log(0.25));
  d.std = torch::exp(0.5 * d.logvar);
  torch::Generator g1 = at::detail::createCPUGenerator(42), g2 = at::detail::createCPUGenerator(42),
                   g3 = at::detail::createCPUGenerator(43), g4 = at::detail::createCPUGenerator(42);
  torch::Tensor a = d.Sample(g1), b = d.Sample(g2), c = d.Sample(g3);
  CHECK(torch::equal(a, b));
  CHECK_FALSE(torch::equal(a, c));
  // The draw is randn of the mean's shape, fp32, from the given generator (as diffusers').
  CHECK(torch::equal(a, d.mean + d.std * torch::randn(d.mean.sizes(), g4)));
  // The generator advances: a second sample differs.
  CHECK_FALSE(torch::equal(d.Sample(g1), a));
  torch::Tensor n = (a - 0.5) / 0.5;  // 32768 standard normal draws
  CHECK(std::abs(n.mean().item<double>()) < 0.03);
  CHECK(std::abs(n.std().item<double>() - 1) < 0.02);
  CHECK(std::abs((n > 0).to(torch::kFloat64).mean().item<double>() - 0.5) < 0.02);
  // PyTorch's CPU normal stream: torch.manual_seed(0); torch.randn(4).
  torch::Generator g0 = at::detail::createCPUGenerator(0);
  torch::Tensor r = torch::randn({4}, g0);
  CHECK(r[0].item<double>() == Approx(1.5410).margin(1e-4));
  CHECK(r[1].item<double>() == Approx(-0.2934).margin(1e-4));
  CHECK(r[2].item<double>() == Approx(-2.1788).margin(1e-4));
  CHECK(r[3].item<double>() == Approx(0.5684).margin(1e-4));
}

TEST_CASE("pipeline scaling and the 8-bit output", "[vae]") {
  VaeConfig c;  // scaling_factor 0.18215, no shift
  torch::Tensor z = torch::tensor({1.0f, -2.0f});
  CHECK(torch::equal(ScaleLatents(c, z), z * 0.18215));
  CHECK(torch::equal(UnscaleLatents(c, z), z / 0.18215));
  // (x/2 + 0.5).clamp(0, 1) * 255, rounded half to even.
  torch::Tensor x = torch::tensor({-2.0f, -1.0f, 0.0f, 0.5f, 1.0f, 3.0f}).view({1, 1, 2, 3});
  torch::Tensor u8 = DecodedToU8(x);
  CHECK(u8.scalar_type() == torch::kUInt8);
  CHECK(u8.sizes() == x.sizes());
  std::vector<int> got;
  for (int64_t i = 0; i < u8.numel(); ++i) got.push_back(u8.flatten()[i].item<int>());
  // 127.5 rounds to even (128), 191.25 to 191.
  CHECK(got == std::vector<int>{0, 0, 128, 191, 255, 255});
}

TEST_CASE("vae CLI reproduces the reference outputs", "[vae][cli][fixture]") {
  FIXTURE_SETS(sets, "vae", "weights.safetensors");
  TempDir tmp;
  for (const std::string& dir : sets) {
    INFO(dir);
    std::vector<std::string> args = {"vae",
                                     "--config",
                                     dir + "/config.json",
                                     "--weights",
                                     dir + "/weights.safetensors",
                                     "--inputs",
                                     dir + "/inputs.safetensors",
                                     "--seed",
                                     "7"};
    std::vector<std::string> first = args;
    first.insert(first.end(), {"--out", tmp / "a.safetensors"});
    text::testing::CliRun r = RunTrainCli(first);
    INFO(r.err);
    REQUIRE(r.code == 0);
    TensorMap got = MustLoad(tmp / "a.safetensors"), ref = MustLoad(dir + "/outputs.safetensors");
    for (const char* k : {"mean", "logvar", "std", "decoded", "decoded_u8", "sample", "latents"}) {
      CHECK(got.count(k) == 1);
    }
    CheckOutputs(got, ref);
    CHECK(torch::equal(got.at("decoded_u8"), DecodedToU8(got.at("decoded"))));
    torch::Generator gen = at::detail::createCPUGenerator(7);
    torch::Tensor noise = torch::randn(got.at("mean").sizes(), gen);
    CHECK(torch::allclose(got.at("sample"), got.at("mean") + got.at("std") * noise));
    VaeConfig c = MustVaeConfig(MustJson(dir + "/config.json"));
    CHECK(torch::equal(got.at("latents"), ScaleLatents(c, got.at("sample"))));
    // Same seed, same bytes; the PNGs hold decoded_u8.
    args.insert(args.end(), {"--out", tmp / "b.safetensors", "--png", tmp / "png"});
    REQUIRE(RunTrainCli(args).code == 0);
    CHECK(ReadFile(tmp / "a.safetensors").value() == ReadFile(tmp / "b.safetensors").value());
    const torch::Tensor& u8 = got.at("decoded_u8");
    for (int64_t i = 0; i < u8.size(0); ++i) {
      Result<std::string> png = ReadFile(tmp / ("png/" + std::to_string(i) + ".png"));
      REQUIRE(png.ok());
      Result<images::Image> img = images::DecodeImage(*png);
      REQUIRE(img.ok());
      REQUIRE(img->height == u8.size(2));
      REQUIRE(img->width == u8.size(3));
      torch::Tensor back =
          torch::from_blob(img->rgb.data(), {img->height, img->width, 3}, torch::kUInt8)
              .permute({2, 0, 1});
      CHECK(torch::equal(back, u8[i]));
    }
  }
}

TEST_CASE("vae CLI: bad inputs give one clear error", "[vae][cli][fixture]") {
  FIXTURE_SETS(sets, "vae", "weights.safetensors");
  const std::string dir = sets.front();
  TempDir tmp;
  auto inputs = [&](const std::string& name, const TensorMap& t) {
    REQUIRE(SaveSafetensors(tmp / name, t).ok());
    return tmp / name;
  };
  Json cfg = MustJson(dir + "/config.json");
  int64_t f = MustVaeConfig(cfg).spatial_factor();
  cfg["act_fn"] = "gelu";
  REQUIRE(WriteFileDurable(tmp / "gelu.json", DumpJson(cfg)).ok());
  TensorMap w = MustLoad(dir + "/weights.safetensors");
  w.erase("decoder.conv_out.bias");
  REQUIRE(SaveSafetensors(tmp / "partial.safetensors", w).ok());
  std::string ok_in = dir + "/inputs.safetensors";
  struct Case {
    std::string config, weights, in, needle;
  };
  const Case cases[] = {
      {"", "", inputs("c4.st", {{"image", torch::zeros({1, 4, 32, 32})}}), "3 channels"},
      {"", "", inputs("thin.st", {{"image", torch::zeros({1, 3, 32, f / 2})}}), "too small"},
      {"", "", inputs("lat.st", {{"latent", torch::zeros({1, 3, 8, 8})}}), "latents must"},
      {"", "", inputs("none.st", {{"x", torch::zeros({1})}}), "image"},
      {tmp / "gelu.json", "", ok_in, "act_fn"},
      {"", tmp / "partial.safetensors", ok_in, "missing keys: decoder.conv_out.bias"},
      {"", tmp / "nothing.safetensors", ok_in, "nothing.safetensors"}};
  for (const Case& c : cases) {
    text::testing::CliRun r =
        RunTrainCli({"vae", "--config", c.config.empty() ? dir + "/config.json" : c.config,
                     "--weights", c.weights.empty() ? dir + "/weights.safetensors" : c.weights,
                     "--inputs", c.in, "--out", tmp / "o.safetensors"});
    INFO(r.err);
    CHECK(r.code == kExitFailed);
    CHECK(r.err.find(c.needle) != std::string::npos);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  }
  CHECK(RunTrainCli({"vae", "--config", dir + "/config.json"}).code == kExitUsage);
  CHECK(RunTrainCli({"vae", "--inputs"}).code == kExitUsage);
}
