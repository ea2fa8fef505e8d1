// lora-sd model tests: equivalence with diffusers' reference vectors, LoRA file formats,
// weight loading errors, config validation, gradient checkpointing.
#include "agent/train/models/unet/unet.h"
#include "agent/train/models/unet/unet_lora.h"
#include "train_test_util.h"  // Catch2, via the CHECK fix-up

using namespace gleaner;
using namespace gleaner::train::testing;

namespace {

struct FixtureModel {
  std::shared_ptr<UNet> unet;
  TensorMap inputs;
  torch::Tensor Forward() {
    return unet->forward(inputs.at("sample"), inputs.at("timestep"),
                         inputs.at("encoder_hidden_states"));
  }
};

FixtureModel LoadFixtureModel(const std::string& dir) {
  FixtureModel m;
  m.unet = std::make_shared<UNet>(MustConfig(dir + "/config.json"));
  Status s = LoadStateDict(*m.unet, MustLoad(dir + "/weights.safetensors"));
  REQUIRE(s.ok());
  m.inputs = MustLoad(dir + "/inputs.safetensors");
  return m;
}

void CheckGrads(const DenoiserLora& lora, const TensorMap& ref) {
  TensorMap got = lora.PeftGradients();
  REQUIRE(got.size() == ref.size());
  double worst = 0;
  for (const auto& [k, v] : ref) {
    REQUIRE(got.count(k));
    double rel = RelL2(got.at(k), v);
    worst = std::max(worst, rel);
    INFO(k);
    CHECK(rel <= 1e-4);
  }
  WARN("worst LoRA gradient rel-L2 vs reference: " << worst);
}

}  // namespace

TEST_CASE("UNet forward matches the diffusers reference", "[lora_sd][fixture]") {
  SKIP_WITHOUT_FIXTURE(dir);
  FixtureModel m = LoadFixtureModel(dir);
  torch::NoGradGuard no_grad;
  torch::Tensor y = m.Forward();
  torch::Tensor ref = MustLoad(dir + "/output.safetensors").at("sample");
  REQUIRE(y.sizes() == ref.sizes());
  double rel = RelL2(y, ref), mx = MaxAbs(y, ref);
  WARN("forward rel-L2 " << rel << ", max abs " << mx);
  CHECK(rel <= 1e-5);
  CHECK(mx <= 1e-4);
}

TEST_CASE("LoRA forward matches with PEFT and kohya files", "[lora_sd][fixture]") {
  SKIP_WITHOUT_FIXTURE(dir);
  torch::Tensor ref = MustLoad(dir + "/lora/output.safetensors").at("sample");
  for (const char* file : {"lora.safetensors", "lora_kohya.safetensors"}) {
    FixtureModel m = LoadFixtureModel(dir);
    Result<DenoiserLora> lora = DenoiserLora::Load(*m.unet, dir + "/lora/" + file);
    REQUIRE(lora.ok());
    CHECK(lora->size() == 32);
    CHECK(lora->rank() == 4);
    CHECK(lora->alpha() == 4.0);
    torch::NoGradGuard no_grad;
    torch::Tensor y = m.Forward();
    double rel = RelL2(y, ref), mx = MaxAbs(y, ref);
    WARN(file << ": LoRA forward rel-L2 " << rel << ", max abs " << mx);
    CHECK(rel <= 1e-5);
    CHECK(mx <= 1e-4);
  }
}

TEST_CASE("LoRA gradients match the reference, with and without checkpointing",
          "[lora_sd][fixture]") {
  SKIP_WITHOUT_FIXTURE(dir);
  TensorMap ref = MustLoad(dir + "/lora/grad.safetensors");
  for (bool ckpt : {false, true}) {
    FixtureModel m = LoadFixtureModel(dir);
    m.unet->set_gradient_checkpointing(ckpt);
    Result<DenoiserLora> lora = DenoiserLora::Load(*m.unet, dir + "/lora/lora.safetensors");
    REQUIRE(lora.ok());
    torch::Tensor loss = (m.Forward() * m.inputs.at("R")).sum();
    loss.backward();
    INFO("gradient checkpointing " << ckpt);
    CHECK(loss.item<double>() == Approx(-7.657959461212158).epsilon(1e-5));
    CheckGrads(*lora, ref);
  }
}

TEST_CASE("fresh LoRA has the fixture's key names and shapes in both namings",
          "[lora_sd][fixture]") {
  SKIP_WITHOUT_FIXTURE(dir);
  UNet unet(MustConfig(dir + "/config.json"));
  Result<DenoiserLora> lora = DenoiserLora::Attach(unet, 4, 4.0, at::detail::createCPUGenerator(1));
  REQUIRE(lora.ok());
  auto same_keys = [](const TensorMap& got, const TensorMap& ref) {
    REQUIRE(got.size() == ref.size());
    for (const auto& [k, v] : ref) {
      INFO(k);
      REQUIRE(got.count(k));
      CHECK(got.at(k).sizes() == v.sizes());
      CHECK(got.at(k).scalar_type() == v.scalar_type());
    }
  };
  same_keys(lora->PeftTensors(), MustLoad(dir + "/lora/lora.safetensors"));
  TensorMap kohya = lora->KohyaTensors();
  same_keys(kohya, MustLoad(dir + "/lora/lora_kohya.safetensors"));
  CHECK(kohya.at("lora_unet_mid_block_attentions_0_transformer_blocks_0_attn2_to_out_0.alpha")
            .item<float>() == 4.0f);
  // Fresh adapters: B is zero, A has std ~ 1/r.
  TensorMap peft = lora->PeftTensors();
  torch::Tensor b =
      peft.at("unet.mid_block.attentions.0.transformer_blocks.0.attn1.to_q.lora_B.weight");
  CHECK(b.abs().max().item<float>() == 0.0f);
  torch::Tensor all_a = torch::cat(
      {peft.at("unet.mid_block.attentions.0.transformer_blocks.0.attn1.to_q.lora_A.weight")
           .flatten(),
       peft.at("unet.down_blocks.0.attentions.0.transformer_blocks.0.attn1.to_q.lora_A.weight")
           .flatten()});
  CHECK(all_a.std().item<double>() == Approx(0.25).epsilon(0.2));
}

TEST_CASE("weight loading names missing, unexpected and mis-shaped keys", "[lora_sd]") {
  UNetConfig c = TinyConfig();
  TensorMap w = RandomWeights(c, 3);
  {
    UNet u(c);
    REQUIRE(LoadStateDict(u, w).ok());
    for (const auto& p : u.parameters()) CHECK_FALSE(p.requires_grad());
  }
  TensorMap missing = w;
  missing.erase("mid_block.attentions.0.proj_in.weight");
  UNet u1(c);
  Status s = LoadStateDict(u1, missing);
  CHECK(s.message().find("missing keys: mid_block.attentions.0.proj_in.weight") !=
        std::string::npos);
  TensorMap extra = w;
  extra["down_blocks.9.bogus"] = torch::zeros({1});
  UNet u2(c);
  s = LoadStateDict(u2, extra);
  CHECK(s.message().find("unexpected keys: down_blocks.9.bogus") != std::string::npos);
  TensorMap shaped = w;
  shaped["conv_in.bias"] = torch::zeros({3});
  UNet u3(c);
  s = LoadStateDict(u3, shaped);
  CHECK(s.message().find("shape mismatch for: conv_in.bias") != std::string::npos);
  // F16 / BF16 weights load (converted to the fp32 parameters).
  TensorMap half = w;
  for (auto& [k, v] : half) v = v.to(torch::kBFloat16);
  UNet u4(c);
  CHECK(LoadStateDict(u4, half).ok());
}

TEST_CASE("sharded safetensors index loads like a single file", "[lora_sd]") {
  TempDir tmp;
  TensorMap w = RandomWeights(TinyConfig(), 5);
  TensorMap a, b;
  Json index = {{"metadata", Json::object()}, {"weight_map", Json::object()}};
  int i = 0;
  for (const auto& [k, v] : w) {
    bool first = (i++ % 2) == 0;
    (first ? a : b)[k] = v.to(torch::kFloat16);
    index["weight_map"][k] =
        first ? "m-00001-of-00002.safetensors" : "m-00002-of-00002.safetensors";
  }
  REQUIRE(SaveSafetensors(tmp / "m-00001-of-00002.safetensors", a).ok());
  REQUIRE(SaveSafetensors(tmp / "m-00002-of-00002.safetensors", b).ok());
  REQUIRE(WriteFileDurable(tmp / "m.safetensors.index.json", index.dump()).ok());
  Result<TensorMap> got = LoadWeights(tmp / "m.safetensors.index.json");
  REQUIRE(got.ok());
  CHECK(got->size() == w.size());
  UNet u(TinyConfig());
  CHECK(LoadStateDict(u, *got).ok());
  index["weight_map"]["extra"] = "../x.safetensors";
  REQUIRE(WriteFileDurable(tmp / "bad.safetensors.index.json", index.dump()).ok());
  CHECK_FALSE(LoadWeights(tmp / "bad.safetensors.index.json").ok());
}

TEST_CASE("UNet config validation rejects what is not implemented", "[lora_sd]") {
  Json good = UNetConfigToJson(TinyConfig());
  REQUIRE(ParseUNetConfig(good).ok());
  auto rejects = [&](const char* key, Json value, const char* needle) {
    Json j = good;
    j[key] = std::move(value);
    Result<UNetConfig> r = ParseUNetConfig(j);
    INFO(key);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message().find(needle) != std::string::npos);
  };
  rejects("class_embed_type", "timestep", "class_embed_type");
  rejects("down_block_types", Json::array({"CrossAttnDownBlock2D", "SimpleDown"}), "SimpleDown");
  rejects("block_out_channels", Json::array({32, 60}), "norm_num_groups");
  rejects("block_out_channels", Json::array({32}), "one entry per");
  rejects("layers_per_block", Json::array({1, 1, 1}), "layers_per_block");
  rejects("attention_head_dim", 5, "divisible");
  rejects("act_fn", "gelu", "act_fn");
  rejects("cross_attention_dim", "x", "cross_attention_dim");
  CHECK_FALSE(ParseUNetConfig(Json::array()).ok());
  // SD 1.5 shape: 4 levels, 860M parameters.
  UNetConfig sd = Sd15Config();
  REQUIRE(ParseUNetConfig(UNetConfigToJson(sd)).ok());
}

TEST_CASE("linear-projection transformers and odd latent sizes run", "[lora_sd]") {
  UNetConfig c = TinyConfig();
  c.use_linear_projection = true;
  torch::manual_seed(0);
  UNet u(c);
  torch::NoGradGuard no_grad;
  // 9x9 is not a multiple of 2: upsampling follows the skip sizes, as diffusers does.
  torch::Tensor y =
      u.forward(torch::randn({1, 4, 9, 9}), torch::tensor({5}), torch::randn({1, 3, 32}));
  CHECK(y.sizes() == torch::IntArrayRef({1, 4, 9, 9}));
  bool has_linear_proj = false;
  for (const auto& p : u.named_parameters()) {
    if (p.key() == "down_blocks.0.attentions.0.proj_in.weight") {
      has_linear_proj = p.value().dim() == 2;
    }
  }
  CHECK(has_linear_proj);
}
