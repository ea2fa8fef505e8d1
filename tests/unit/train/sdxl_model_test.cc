// SDXL UNet (addition_embed_type "text_time"): equivalence with diffusers' reference vectors
// (sdxl-unet-ref-* fixtures, every set present, same bounds as the SD 1.x fixture), LoRA files
// in both namings (kohya with sd-scripts' SDXL key names), the diffusers <-> LDM module table,
// config parsing, and base weights held in the compute dtype.
#include "agent/train/models/unet/ldm_names.h"
#include "agent/train/models/unet/unet.h"
#include "agent/train/models/unet/unet_lora.h"
#include "train_test_util.h"  // Catch2, via the CHECK fix-up

using namespace gleaner;
using namespace gleaner::train::testing;

namespace {

// One fixture set: config, weights and inputs, and a model built as the trainer builds it
// (parameters without storage, filled by LoadStateDict).
struct SdxlFixture {
  std::string dir;
  UNetConfig config;
  TensorMap weights, inputs;
  explicit SdxlFixture(const std::string& d)
      : dir(d),
        config(MustConfig(d + "/config.json")),
        weights(MustLoad(d + "/weights.safetensors")),
        inputs(MustLoad(d + "/inputs.safetensors")) {}
  std::shared_ptr<UNet> Model() const {
    auto u = std::make_shared<UNet>(config, BasePlacement{});
    Status s = LoadStateDict(*u, weights);
    INFO(s.ToString());
    REQUIRE(s.ok());
    return u;
  }
  torch::Tensor Forward(UNet& u) const {
    return u.forward(inputs.at("sample"), inputs.at("timestep"), inputs.at("encoder_hidden_states"),
                     {inputs.at("text_embeds"), inputs.at("time_ids")});
  }
};

void CheckOutput(const torch::Tensor& y, const torch::Tensor& ref, const std::string& what) {
  REQUIRE(y.sizes() == ref.sizes());
  double rel = RelL2(y, ref), mx = MaxAbs(y, ref);
  WARN(what << ": rel-L2 " << rel << ", max abs " << mx);
  CHECK(rel <= 1e-5);
  CHECK(mx <= 1e-4);
}

}  // namespace

TEST_CASE("SDXL UNet forward matches the diffusers reference", "[lora_sd][sdxl][fixture]") {
  SKIP_WITHOUT_SDXL_FIXTURES(dirs);
  for (const std::string& dir : dirs) {
    INFO(dir);
    SdxlFixture f(dir);
    CHECK(f.config.has_text_time());
    auto u = f.Model();
    torch::NoGradGuard no_grad;
    CheckOutput(f.Forward(*u), MustLoad(dir + "/output.safetensors").at("sample"),
                dir + " forward");
  }
}

TEST_CASE("SDXL LoRA forward matches with the PEFT file and with a kohya file (LDM names)",
          "[lora_sd][sdxl][fixture]") {
  SKIP_WITHOUT_SDXL_FIXTURES(dirs);
  for (const std::string& dir : dirs) {
    INFO(dir);
    SdxlFixture f(dir);
    torch::Tensor ref = MustLoad(dir + "/lora/output.safetensors").at("sample");
    TensorMap peft = MustLoad(dir + "/lora/lora.safetensors");
    auto u = f.Model();
    Result<DenoiserLora> lora = DenoiserLora::Load(*u, dir + "/lora/lora.safetensors");
    REQUIRE(lora.ok());
    CHECK(lora->size() * 2 == peft.size());
    {
      torch::NoGradGuard no_grad;
      CheckOutput(f.Forward(*u), ref, dir + " LoRA (PEFT file)");
    }
    // Our kohya file of the same LoRA: sd-scripts' SDXL names, and it loads back equal.
    TempDir tmp;
    TensorMap kohya = lora->KohyaTensors();
    CHECK(kohya.size() == peft.size() / 2 * 3);
    for (const auto& [k, v] : kohya) {
      INFO(k);
      CHECK((k.rfind("lora_unet_input_blocks_", 0) == 0 ||
             k.rfind("lora_unet_middle_block_1_", 0) == 0 ||
             k.rfind("lora_unet_output_blocks_", 0) == 0));
    }
    REQUIRE(SaveSafetensors(tmp / "kohya.safetensors", kohya).ok());
    std::vector<std::string> files = {tmp / "kohya.safetensors"};
    if (Bytes(dir + "/lora/adapter_config.json").size() > 0 &&
        ReadFile(dir + "/lora/lora_kohya.safetensors").ok()) {
      files.push_back(dir + "/lora/lora_kohya.safetensors");  // a set may ship its own
    }
    for (const std::string& file : files) {
      INFO(file);
      auto u2 = f.Model();
      Result<DenoiserLora> l2 = DenoiserLora::Load(*u2, file);
      REQUIRE(l2.ok());
      CHECK(l2->rank() == lora->rank());
      CHECK(l2->alpha() == lora->alpha());
      torch::NoGradGuard no_grad;
      CheckOutput(f.Forward(*u2), ref, dir + " LoRA (kohya file)");
    }
  }
}

TEST_CASE("SDXL LoRA gradients match the reference, with and without checkpointing",
          "[lora_sd][sdxl][fixture]") {
  SKIP_WITHOUT_SDXL_FIXTURES(dirs);
  for (const std::string& dir : dirs) {
    SdxlFixture f(dir);
    std::map<std::string, std::string> meta;
    TensorMap ref = MustLoad(dir + "/lora/grad.safetensors", &meta);
    REQUIRE(meta.count("loss"));
    double ref_loss = std::stod(meta.at("loss"));
    for (bool ckpt : {false, true}) {
      INFO(dir << ", gradient checkpointing " << ckpt);
      auto u = f.Model();
      u->set_gradient_checkpointing(ckpt);
      Result<DenoiserLora> lora = DenoiserLora::Load(*u, dir + "/lora/lora.safetensors");
      REQUIRE(lora.ok());
      torch::Tensor loss = (f.Forward(*u) * f.inputs.at("R")).sum();
      loss.backward();
      CHECK(std::abs(loss.item<double>() - ref_loss) <= 1e-4 * std::abs(ref_loss) + 1e-4);
      TensorMap got = lora->PeftGradients();
      REQUIRE(got.size() == ref.size());
      double worst = 0, worst_abs = 0;
      for (const auto& [k, v] : ref) {
        INFO(k);
        REQUIRE(got.count(k));
        double rel = RelL2(got.at(k), v), mx = MaxAbs(got.at(k), v);
        worst = std::max(worst, rel);
        worst_abs = std::max(worst_abs, mx);
        CHECK(rel <= 1e-4);
        CHECK(mx <= 1e-3);
      }
      WARN(dir << " (checkpointing " << ckpt << "): worst LoRA gradient rel-L2 " << worst
               << ", max abs " << worst_abs);
    }
  }
}

TEST_CASE("SDXL LoRA targets are the fixture's adapted modules", "[lora_sd][sdxl][fixture]") {
  SKIP_WITHOUT_SDXL_FIXTURES(dirs);
  for (const std::string& dir : dirs) {
    INFO(dir);
    Result<Json> adapter = ParseJson(Bytes(dir + "/lora/adapter_config.json"));
    REQUIRE(adapter.ok());
    std::set<std::string> want;
    for (const Json& m : (*adapter)["adapted_modules"]) want.insert(m.get<std::string>());
    UNet u(MustConfig(dir + "/config.json"), BasePlacement{});
    std::set<std::string> got;
    for (const auto& [name, m] : u.LoraTargets()) got.insert(name);
    CHECK(got == want);
  }
}

TEST_CASE("diffusers <-> LDM module paths: SDXL and SD 1.5 literals", "[lora_sd][sdxl][names]") {
  std::vector<ModulePathPair> xl = LdmModuleTable(SdxlConfig());
  std::vector<ModulePathPair> sd = LdmModuleTable(Sd15Config());
  const std::pair<const char*, const char*> sdxl_cases[] = {
      {"down_blocks.1.attentions.0.transformer_blocks.0.attn1.to_q",
       "input_blocks.4.1.transformer_blocks.0.attn1.to_q"},
      {"down_blocks.1.attentions.1.transformer_blocks.1.attn2.to_k",
       "input_blocks.5.1.transformer_blocks.1.attn2.to_k"},
      {"down_blocks.2.attentions.1.transformer_blocks.9.attn2.to_out.0",
       "input_blocks.8.1.transformer_blocks.9.attn2.to_out.0"},
      {"mid_block.attentions.0.transformer_blocks.0.attn1.to_q",
       "middle_block.1.transformer_blocks.0.attn1.to_q"},
      {"mid_block.attentions.0.transformer_blocks.9.attn2.to_v",
       "middle_block.1.transformer_blocks.9.attn2.to_v"},
      {"up_blocks.0.attentions.0.transformer_blocks.0.attn1.to_q",
       "output_blocks.0.1.transformer_blocks.0.attn1.to_q"},
      {"up_blocks.0.attentions.2.transformer_blocks.9.attn1.to_out.0",
       "output_blocks.2.1.transformer_blocks.9.attn1.to_out.0"},
      {"up_blocks.1.attentions.2.transformer_blocks.1.attn2.to_k",
       "output_blocks.5.1.transformer_blocks.1.attn2.to_k"},
      {"up_blocks.0.upsamplers.0.conv", "output_blocks.2.2.conv"},
      {"up_blocks.1.upsamplers.0.conv", "output_blocks.5.2.conv"},
      {"down_blocks.0.downsamplers.0.conv", "input_blocks.3.0.op"},
      {"down_blocks.1.downsamplers.0.conv", "input_blocks.6.0.op"},
      {"down_blocks.1.resnets.0.conv_shortcut", "input_blocks.4.0.skip_connection"},
      {"up_blocks.2.resnets.2.norm1", "output_blocks.8.0.in_layers.0"},
      {"mid_block.resnets.1.time_emb_proj", "middle_block.2.emb_layers.1"},
      {"add_embedding.linear_2", "label_emb.0.2"},
      {"time_embedding.linear_1", "time_embed.0"},
      {"conv_in", "input_blocks.0.0"},
      {"conv_out", "out.2"}};
  for (const auto& [d, l] : sdxl_cases) {
    INFO(d);
    CHECK(DiffusersToLdm(xl, d) == l);
    CHECK(LdmToDiffusers(xl, l) == d);
  }
  // SD 1.5: four levels, no attention in down block 3 / up block 0.
  CHECK(DiffusersToLdm(sd, "up_blocks.0.upsamplers.0.conv") == "output_blocks.2.1.conv");
  CHECK(DiffusersToLdm(sd, "up_blocks.1.upsamplers.0.conv") == "output_blocks.5.2.conv");
  CHECK(DiffusersToLdm(sd, "down_blocks.3.resnets.1.norm1") == "input_blocks.11.0.in_layers.0");
  CHECK(DiffusersToLdm(sd, "down_blocks.2.downsamplers.0.conv") == "input_blocks.9.0.op");
  CHECK(DiffusersToLdm(sd, "up_blocks.3.attentions.2.proj_out") == "output_blocks.11.1.proj_out");
  CHECK(DiffusersToLdm(sd, "nothing.here").empty());
  // kohya prefixes: LDM paths for SDXL (as sd-scripts writes them), diffusers paths for SD.
  CHECK(
      KohyaLoraPrefix(SdxlConfig(), "down_blocks.1.attentions.0.transformer_blocks.0.attn1.to_q") ==
      "lora_unet_input_blocks_4_1_transformer_blocks_0_attn1_to_q");
  CHECK(
      KohyaLoraPrefix(SdxlConfig(), "mid_block.attentions.0.transformer_blocks.3.attn2.to_out.0") ==
      "lora_unet_middle_block_1_transformer_blocks_3_attn2_to_out_0");
  CHECK(KohyaLoraPrefix(SdxlConfig(), "up_blocks.1.attentions.0.transformer_blocks.1.attn1.to_v") ==
        "lora_unet_output_blocks_3_1_transformer_blocks_1_attn1_to_v");
  CHECK(
      KohyaLoraPrefix(Sd15Config(), "down_blocks.0.attentions.1.transformer_blocks.0.attn1.to_q") ==
      "lora_unet_down_blocks_0_attentions_1_transformer_blocks_0_attn1_to_q");
}

TEST_CASE("diffusers <-> LDM module paths round-trip for every parameter and are one-to-one",
          "[lora_sd][sdxl][names]") {
  UNetConfig nested = TinySdxlConfig();  // per-layer transformer counts, 3 levels, 2 layers
  nested.block_out_channels = {32, 64, 64};
  nested.down_block_types = {"DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"};
  nested.up_block_types = {"CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"};
  nested.layers_per_block = {2, 1, 2};
  nested.num_heads = {2, 4, 4};
  nested.down_transformer_layers = {{1, 1}, {2}, {1, 3}};
  nested.up_transformer_layers = {{2, 1, 1}, {1, 2}, {1, 1, 1}};
  for (const UNetConfig& c : {TinyConfig(), TinySdxlConfig(), nested}) {
    UNet u(c, BasePlacement{});
    std::vector<ModulePathPair> table = LdmModuleTable(c);
    std::set<std::string> ldm_keys;
    for (const auto& [key, shape] : u.parameter_shapes()) {
      INFO(key);
      std::string ldm = DiffusersToLdm(table, key);
      REQUIRE_FALSE(ldm.empty());
      CHECK(ldm.find("down_blocks") == std::string::npos);
      CHECK(ldm.find("up_blocks") == std::string::npos);
      CHECK(LdmToDiffusers(table, ldm) == key);
      CHECK(ldm_keys.insert(ldm).second);
    }
    // kohya file round trip: write with the config's naming, load back the same tensors.
    Result<DenoiserLora> lora = DenoiserLora::Attach(u, 2, 3.0, at::detail::createCPUGenerator(4));
    REQUIRE(lora.ok());
    TempDir tmp;
    REQUIRE(SaveSafetensors(tmp / "k.safetensors", lora->KohyaTensors()).ok());
    UNet u2(c, BasePlacement{});
    Result<DenoiserLora> back = DenoiserLora::Load(u2, tmp / "k.safetensors");
    REQUIRE(back.ok());
    CHECK(back->alpha() == 3.0);
    TensorMap a = lora->PeftTensors(), b = back->PeftTensors();
    REQUIRE(a.size() == b.size());
    for (const auto& [k, v] : a) CHECK(torch::equal(v, b.at(k)));
  }
}

TEST_CASE("SDXL config: text_time, transformer layer lists, sample_size pairs, refusals by name",
          "[lora_sd][sdxl][config]") {
  Json xl = UNetConfigToJson(SdxlConfig());
  Result<UNetConfig> c = ParseUNetConfig(xl);
  REQUIRE(c.ok());
  CHECK(c->pooled_dim() == 1280);
  CHECK(c->down_transformer_layers == std::vector<std::vector<int>>{{1, 1}, {2, 2}, {10, 10}});
  CHECK(c->up_transformer_layers ==
        std::vector<std::vector<int>>{{10, 10, 10}, {2, 2, 2}, {1, 1, 1}});
  CHECK(UNetConfigToJson(*c) == xl);
  CHECK_FALSE(xl.contains("reverse_transformer_layers_per_block"));
  // diffusers' own serialisation has nulls for unset fields, e.g. upcast_attention.
  Json with_nulls = xl;
  with_nulls["upcast_attention"] = nullptr;
  with_nulls["mid_block_only_cross_attention"] = nullptr;
  with_nulls["num_attention_heads"] = nullptr;
  CHECK(ParseUNetConfig(with_nulls).ok());
  Json pair = xl;
  pair["sample_size"] = Json::array({96, 64});
  Result<UNetConfig> p = ParseUNetConfig(pair);
  REQUIRE(p.ok());
  CHECK(p->sample_size == std::vector<int>{96, 64});
  CHECK(UNetConfigToJson(*p)["sample_size"] == Json::array({96, 64}));
  // Per-layer lists with the explicit reverse list, as diffusers allows them.
  Json nested = xl;
  nested["transformer_layers_per_block"] = Json::parse("[1, [2, 3], [4, 10]]");
  nested["reverse_transformer_layers_per_block"] = Json::parse("[[10, 4, 4], [3, 2, 2], 1]");
  Result<UNetConfig> n = ParseUNetConfig(nested);
  REQUIRE(n.ok());
  CHECK(n->down_transformer_layers[1] == std::vector<int>{2, 3});
  CHECK(n->down_transformer_layers[2] == std::vector<int>{4, 10});
  CHECK(n->up_transformer_layers[0] == std::vector<int>{10, 4, 4});
  CHECK(n->up_transformer_layers[2] == std::vector<int>{1, 1, 1});
  Result<UNetConfig> n2 = ParseUNetConfig(UNetConfigToJson(*n));
  REQUIRE(n2.ok());
  CHECK(n2->up_transformer_layers == n->up_transformer_layers);
  CHECK(n2->down_transformer_layers == n->down_transformer_layers);
  // A flat list with an explicit reverse list: the up blocks follow the reverse list.
  Json rev = xl;
  rev["reverse_transformer_layers_per_block"] = Json::array({4, 2, 1});
  Result<UNetConfig> r = ParseUNetConfig(rev);
  REQUIRE(r.ok());
  CHECK(r->up_transformer_layers[0] == std::vector<int>{4, 4, 4});

  auto rejects = [&](Json j, const char* needle) {
    Result<UNetConfig> x = ParseUNetConfig(j);
    INFO(j.dump());
    REQUIRE_FALSE(x.ok());
    INFO(x.status().message());
    CHECK(x.status().message().find(needle) != std::string::npos);
  };
  Json bad = xl;
  bad["addition_embed_type"] = "text";
  rejects(bad, "addition_embed_type");
  bad = xl;
  bad.erase("addition_time_embed_dim");
  rejects(bad, "addition_time_embed_dim");
  bad = xl;
  bad["projection_class_embeddings_input_dim"] = 6 * 256;
  rejects(bad, "projection_class_embeddings_input_dim");
  bad = xl;
  bad["transformer_layers_per_block"] = Json::parse("[1, [2, 2], 10]");
  rejects(bad, "reverse_transformer_layers_per_block");
  bad = xl;
  bad["transformer_layers_per_block"] = Json::parse("[1, [2, 2, 2], 10]");
  bad["reverse_transformer_layers_per_block"] = Json::array({10, 2, 1});
  rejects(bad, "transformer_layers_per_block[1]");
  bad = xl;
  bad["transformer_layers_per_block"] = Json::array({1, 2});
  rejects(bad, "transformer_layers_per_block");
  bad = xl;
  bad["sample_size"] = Json::array({96});
  rejects(bad, "sample_size");
  bad = xl;
  bad["mid_block_only_cross_attention"] = true;
  rejects(bad, "mid_block_only_cross_attention");
  bad = xl;
  bad["mid_block_type"] = nullptr;
  rejects(bad, "mid_block_type");
  bad = xl;
  bad["class_embed_type"] = "projection";
  rejects(bad, "class_embed_type");
  bad = xl;
  bad["cross_attention_dim"] = Json::array({2048, 2048, 2048});
  rejects(bad, "cross_attention_dim");
}

TEST_CASE("base weights: held in the placement's dtype, filled without an fp32 copy",
          "[lora_sd][sdxl][memory]") {
  UNetConfig c = TinySdxlConfig();
  TensorMap w = RandomWeights(c, 2);
  // Before loading, a placed model holds no parameter storage, but knows every shape.
  BasePlacement bf16;
  bf16.dtype = torch::kBFloat16;
  UNet hollow(c, bf16);
  int64_t numel = 0;
  for (const auto& p : hollow.parameters()) numel += p.numel();
  CHECK(numel == 0);
  CHECK(hollow.parameter_shapes().size() == w.size());
  // F16 file -> bf16 base, frozen; LoRA stays fp32.
  TensorMap half = w;
  for (auto& [k, v] : half) v = v.to(torch::kFloat16);
  REQUIRE(LoadStateDict(hollow, half).ok());
  for (const auto& p : hollow.named_parameters()) {
    INFO(p.key());
    CHECK(p.value().scalar_type() == torch::kBFloat16);
    CHECK_FALSE(p.value().requires_grad());
    CHECK(p.value().sizes() == torch::IntArrayRef(hollow.parameter_shapes().at(p.key())));
  }
  Result<DenoiserLora> lora =
      DenoiserLora::Attach(hollow, 4, 4.0, at::detail::createCPUGenerator(1));
  REQUIRE(lora.ok());
  for (const auto& t : lora->Parameters()) CHECK(t.scalar_type() == torch::kFloat32);
  // fp32 placement and an F32 file: the model uses the loaded tensors themselves (no copy).
  UNet same(c, BasePlacement{});
  REQUIRE(LoadStateDict(same, w).ok());
  for (const auto& p : same.named_parameters()) {
    INFO(p.key());
    CHECK(p.value().data_ptr() == w.at(p.key()).data_ptr());
  }
  // Mixed precision puts the base in the compute dtype; on CPU bf16 only (CPU autocast).
  CHECK(PlacementFor(torch::Device(torch::kCUDA, 0), "bf16").dtype == torch::kBFloat16);
  CHECK(PlacementFor(torch::Device(torch::kCUDA, 0), "fp16").dtype == torch::kFloat16);
  CHECK(PlacementFor(torch::Device(torch::kCUDA, 0), "no").dtype == torch::kFloat32);
  CHECK(PlacementFor(torch::kCPU, "bf16").dtype == torch::kBFloat16);
  CHECK(PlacementFor(torch::kCPU, "fp16").dtype == torch::kFloat32);
  // Mis-shaped weights are still named.
  TensorMap bad = w;
  bad["add_embedding.linear_1.weight"] = torch::zeros({128, 81});
  UNet u3(c, BasePlacement{});
  Status s = LoadStateDict(u3, bad);
  CHECK(s.message().find("shape mismatch for: add_embedding.linear_1.weight") != std::string::npos);
}

TEST_CASE("SDXL UNet refuses missing or mis-shaped added conditioning", "[lora_sd][sdxl]") {
  UNetConfig c = TinySdxlConfig();
  torch::manual_seed(0);
  UNet u(c);
  torch::NoGradGuard no_grad;
  torch::Tensor x = torch::randn({2, 4, 8, 8}), t = torch::tensor({3, 500}),
                ctx = torch::randn({2, 5, 32});
  torch::Tensor ids = torch::tensor({64.f, 64.f, 0.f, 0.f, 64.f, 64.f}).repeat({2, 1});
  CHECK(u.forward(x, t, ctx, {torch::randn({2, 32}), ids}).sizes() == x.sizes());
  auto fails = [&](const AddedCond& a, const char* needle) {
    Status s = CatchTorch("forward", [&]() -> Status {
      u.forward(x, t, ctx, a);
      return Status::Ok();
    });
    REQUIRE_FALSE(s.ok());
    CHECK(s.message().find(needle) != std::string::npos);
  };
  fails({}, "needs text_embeds and time_ids");
  fails({torch::randn({2, 31}), ids}, "text_embeds must be [2, 32]");
  fails({torch::randn({2, 32}), ids.slice(1, 0, 5)}, "time_ids must be [2, 6]");
  UNet sd(TinyConfig());
  Status s = CatchTorch("forward", [&]() -> Status {
    sd.forward(x, t, ctx, {torch::randn({2, 32}), ids});
    return Status::Ok();
  });
  CHECK(s.message().find("no addition_embed_type") != std::string::npos);
}
