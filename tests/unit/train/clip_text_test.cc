// CLIP text encoders and their LoRA: transformers' reference outputs and LoRA gradients (API and
// `gleaner-train text-encode`), PEFT and kohya names, config rules, and one clear error per bad
// input.
#include <torch/torch.h>

#include <algorithm>
#undef CHECK  // glog's (via libtorch); Catch2's must win
#include <catch2/catch.hpp>

#include "agent/protocol/trainer_protocol.h"
#include "agent/train/models/text/text_encoder_lora.h"
#include "tests/skip.h"
#include "text_test_util.h"

using namespace gleaner;
using namespace gleaner::train;
using namespace gleaner::train::text;
using namespace gleaner::train::text::testing;
namespace h = gleaner::testing;

namespace {

const char* const kEncoders[] = {"text_encoder", "text_encoder_2"};

#define SKIP_WITHOUT_TEXT_FIXTURE()                                                    \
  if (!FileExists(FixtureSet("clip-text-ref-a") + "/inputs.safetensors")) {            \
    GLEANER_SKIP("fixtures not found under " GLEANER_FIXTURES_DIR "/clip-text-ref-a"); \
  }

TensorMap MustLoad(const std::string& path, std::map<std::string, std::string>* meta = nullptr) {
  Result<TensorMap> r = LoadSafetensors(path, meta);
  if (!r.ok()) FAIL(r.status().ToString());
  return *r;
}

std::shared_ptr<ClipTextModel> MustModel(const std::string& dir) {
  auto m = LoadClipTextModel(dir + "/config.json", dir + "/weights.safetensors");
  if (!m.ok()) FAIL(m.status().ToString());
  return *m;
}

double MaxAbs(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kFloat64) - b.to(torch::kFloat64)).abs().max().item<double>();
}
double RelL2(const torch::Tensor& a, const torch::Tensor& ref) {
  torch::Tensor r = ref.to(torch::kFloat64);
  return ((a.to(torch::kFloat64) - r).norm() / r.norm()).item<double>();
}

// The README's tolerances: outputs max|d| <= 1e-4 and rel-L2 <= 1e-5.
void CheckOutputs(const TensorMap& got, const TensorMap& ref) {
  for (const auto& [name, r] : ref) {
    INFO(name);
    REQUIRE(got.count(name));
    REQUIRE(got.at(name).sizes() == r.sizes());
    CHECK(MaxAbs(got.at(name), r) <= 1e-4);
    CHECK(RelL2(got.at(name), r) <= 1e-5);
  }
}

// Grads: rel-L2 <= 1e-4 and max|d| <= 1e-4 max|ref|; zero references exactly 0.
void CheckGrads(const TensorMap& got, const TensorMap& ref) {
  int zeros = 0;
  for (const auto& [name, r] : ref) {
    INFO(name);
    REQUIRE(got.count(name));
    if (r.abs().max().item<double>() == 0) {
      CHECK(got.at(name).abs().max().item<double>() == 0);
      ++zeros;
      continue;
    }
    CHECK(RelL2(got.at(name), r) <= 1e-4);
    CHECK(MaxAbs(got.at(name), r) <= 1e-4 * r.abs().max().item<double>());
  }
  CHECK(zeros == 8);  // the last layer's 4 projections do not reach hidden_states[-2]
}

TensorMap ToMap(const ClipTextOutput& y) {
  TensorMap m{{"last_hidden_state", y.last_hidden_state.detach()},
              {"penultimate_hidden_state", y.penultimate_hidden_state.detach()},
              {"pooler_output", y.pooler_output.detach()}};
  if (y.text_embeds.defined()) m["text_embeds"] = y.text_embeds.detach();
  return m;
}

// The fixture's R for an encoder: R for text_encoder, R_2 for text_encoder_2.
torch::Tensor RFor(const TensorMap& inputs, const std::string& encoder) {
  return inputs.at(encoder == "text_encoder" ? "R" : "R_2");
}

ClipTextConfig TinyConfig() {
  ClipTextConfig c;
  c.vocab_size = 50;
  c.hidden_size = 8;
  c.intermediate_size = 12;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 2;
  c.max_position_embeddings = 10;
  return c;
}

std::string ErrorOf(const Status& s) {
  REQUIRE_FALSE(s.ok());
  return s.message();
}

}  // namespace

TEST_CASE("CLIP text encoders match the transformers reference", "[text][fixture]") {
  SKIP_WITHOUT_TEXT_FIXTURE();
  torch::NoGradGuard no_grad;
  for (const std::string& set : ReferenceSets("clip-text", "inputs.safetensors")) {
    TensorMap inputs = MustLoad(set + "/inputs.safetensors");
    for (const std::string enc : kEncoders) {
      INFO(set << " " << enc);
      auto model = MustModel(set + "/" + enc);
      CHECK(model->config().with_projection == (enc == "text_encoder_2"));
      REQUIRE(CheckInputIds(model->config(), inputs.at("input_ids")).ok());
      CheckOutputs(ToMap(model->forward(inputs.at("input_ids"))),
                   MustLoad(set + "/" + enc + "/output.safetensors"));
      // config_full.json (every field written) describes the same model.
      Result<ClipTextConfig> full = LoadClipTextConfig(set + "/" + enc + "/config_full.json");
      REQUIRE(full.ok());
      CHECK(full->with_projection == model->config().with_projection);
      CHECK(full->hidden_act == model->config().hidden_act);
      CHECK(full->eos_token_id == model->config().eos_token_id);
    }
  }
}

TEST_CASE("text-encoder LoRA outputs and gradients match the reference", "[text][fixture]") {
  SKIP_WITHOUT_TEXT_FIXTURE();
  for (const std::string& set : ReferenceSets("clip-text", "inputs.safetensors")) {
    TensorMap inputs = MustLoad(set + "/inputs.safetensors");
    for (const std::string enc : kEncoders) {
      INFO(set << " " << enc);
      const std::string dir = set + "/" + enc;
      auto model = MustModel(dir);
      std::map<std::string, std::string> meta;
      TensorMap file = MustLoad(dir + "/lora/lora.safetensors", &meta);
      Result<TextEncoderRole> role = TextEncoderRoleIn(file, model->config().with_projection);
      REQUIRE(role.ok());
      CHECK(TextEncoderLoraPrefixes(*role).peft == enc);
      LoraAdapters lora = TextEncoderLora(*model, *role);
      std::set<std::string> used;
      Status s = lora.Read(file, meta, &used);
      REQUIRE(s.ok());
      CHECK(used.size() == file.size());
      CHECK(lora.size() == 12);
      CHECK(lora.Tensors(LoraFormat::kPeft).size() == file.size());

      ClipTextOutput y = model->forward(inputs.at("input_ids"));
      CheckOutputs(ToMap(y), MustLoad(dir + "/lora/output.safetensors"));
      torch::Tensor loss = (y.penultimate_hidden_state * RFor(inputs, enc)).sum();
      loss.backward();
      std::map<std::string, std::string> grad_meta;
      TensorMap ref = MustLoad(dir + "/lora/grad.safetensors", &grad_meta);
      CheckGrads(lora.Gradients(LoraFormat::kPeft), ref);
      double ref_loss = std::stod(grad_meta.at("loss"));
      CHECK(std::abs(loss.item<double>() - ref_loss) <= 1e-5 * std::abs(ref_loss));
    }
  }
}

TEST_CASE("text-encode CLI reproduces outputs and gradients in PEFT and kohya names",
          "[text][cli][fixture]") {
  SKIP_WITHOUT_TEXT_FIXTURE();
  const std::string set = FixtureSet("clip-text-ref-a");
  h::TempDir tmp("gleaner-text-encode");
  TensorMap inputs = MustLoad(set + "/inputs.safetensors");
  for (const std::string enc : kEncoders) {
    INFO(enc);
    const std::string dir = set + "/" + enc;
    auto args = [&](const std::string& out) {
      return std::vector<std::string>{"text-encode",
                                      "--config",
                                      dir + "/config.json",
                                      "--weights",
                                      dir + "/weights.safetensors",
                                      "--inputs",
                                      set + "/inputs.safetensors",
                                      "--out",
                                      tmp.File(out)};
    };
    // Without LoRA.
    CliRun run = RunTrainCli(args("plain.safetensors"), tmp.path());
    INFO(run.err);
    REQUIRE(run.code == 0);
    CheckOutputs(MustLoad(tmp.File("plain.safetensors")), MustLoad(dir + "/output.safetensors"));
    CHECK(MustLoad(tmp.File("plain.safetensors")).count("text_embeds") ==
          (enc == "text_encoder_2" ? 1u : 0u));

    // The fixture's PEFT file, then the same adapters under kohya names (SD 1.x names for the
    // first encoder, SDXL's lora_te2 for the second), each with gradients under its own names.
    REQUIRE(SaveSafetensors(tmp.File("r.safetensors"), {{"R", RFor(inputs, enc)}}).ok());
    TensorMap grads = MustLoad(dir + "/lora/grad.safetensors");
    auto model = MustModel(dir);
    std::map<std::string, std::string> meta;
    TensorMap peft = MustLoad(dir + "/lora/lora.safetensors", &meta);
    TextEncoderRole kohya_role =
        enc == "text_encoder" ? TextEncoderRole::kSd : TextEncoderRole::kSdxl2;
    LoraAdapters lora = TextEncoderLora(*model, kohya_role);
    std::set<std::string> used;
    REQUIRE(lora.Read(peft, meta, &used).ok());
    TensorMap kohya = lora.Tensors(LoraFormat::kKohya);
    const std::string k0 =
        TextEncoderLoraPrefixes(kohya_role).kohya + "_text_model_encoder_layers_0_self_attn_q_proj";
    REQUIRE(kohya.count(k0 + ".lora_down.weight"));
    REQUIRE(kohya.count(k0 + ".lora_up.weight"));
    CHECK(kohya.at(k0 + ".alpha").item<float>() == 4.0f);
    REQUIRE(SaveSafetensors(tmp.File("kohya.safetensors"), kohya).ok());

    for (const char* lora_file : {"peft", "kohya"}) {
      INFO(lora_file);
      std::string lora_path = std::string(lora_file) == "peft" ? dir + "/lora/lora.safetensors"
                                                               : tmp.File("kohya.safetensors");
      std::vector<std::string> a = args("lora.safetensors");
      a.insert(a.end(), {"--lora", lora_path, "--grad-weights", tmp.File("r.safetensors")});
      run = RunTrainCli(a, tmp.path());
      INFO(run.err);
      REQUIRE(run.code == 0);
      std::map<std::string, std::string> out_meta;
      TensorMap out = MustLoad(tmp.File("lora.safetensors"), &out_meta);
      CheckOutputs(out, MustLoad(dir + "/lora/output.safetensors"));
      TensorMap named = grads;  // the reference's gradients under this file's names
      if (std::string(lora_file) == "kohya") {
        named.clear();
        for (const auto& target : model->LoraTargets()) {
          for (LoraPart part : {LoraPart::kA, LoraPart::kB}) {
            named[LoraKey(LoraFormat::kKohya, TextEncoderLoraPrefixes(kohya_role), target.first,
                          part)] =
                grads.at(LoraKey(LoraFormat::kPeft, {enc, ""}, target.first, part));
          }
        }
      }
      CheckGrads(out, named);
      CHECK(out_meta.count("loss_value"));
    }
  }
}

TEST_CASE("text-encode CLI refuses bad input with one line, usage errors exit 64",
          "[text][cli][fixture]") {
  SKIP_WITHOUT_TEXT_FIXTURE();
  const std::string set = FixtureSet("clip-text-ref-a"), dir = set + "/text_encoder";
  h::TempDir tmp("gleaner-text-encode-bad");
  auto expect = [&](std::vector<std::string> extra, int code, const std::string& message,
                    const std::string& config = "", const std::string& inputs = "") {
    std::vector<std::string> a = {"text-encode",
                                  "--config",
                                  config.empty() ? dir + "/config.json" : config,
                                  "--weights",
                                  dir + "/weights.safetensors",
                                  "--inputs",
                                  inputs.empty() ? set + "/inputs.safetensors" : inputs};
    a.insert(a.end(), extra.begin(), extra.end());
    CliRun r = RunTrainCli(a, tmp.path());
    INFO(r.err);
    CHECK(r.code == code);
    CHECK(r.err.find(message) != std::string::npos);
    if (code == kExitFailed) CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  };
  const std::string out = tmp.File("o.safetensors");
  expect({}, kExitUsage, "missing --out");
  expect({"--out", out, "--lora"}, kExitUsage, "--lora needs a value");
  expect({"--out", out, "--grad-weights", set + "/inputs.safetensors"}, kExitFailed,
         "--grad-weights needs --lora");
  REQUIRE(SaveSafetensors(tmp.File("r.safetensors"), {{"R", torch::zeros({2, 77, 31})}}).ok());
  expect({"--out", out, "--lora", dir + "/lora/lora.safetensors", "--grad-weights",
          tmp.File("r.safetensors")},
         kExitFailed, "R must have penultimate_hidden_state's shape [2, 77, 32]");
  expect({"--out", out, "--lora", set + "/inputs.safetensors"}, kExitFailed,
         "no text-encoder keys");
  expect({"--out", out}, kExitFailed, "text_projection.weight",
         set + "/text_encoder_2/config.json");

  TensorMap inputs = MustLoad(set + "/inputs.safetensors");
  torch::Tensor ids = inputs.at("input_ids").clone();
  ids.index_put_({0, 3}, 49408);
  REQUIRE(SaveSafetensors(tmp.File("bad_ids.safetensors"), {{"input_ids", ids}}).ok());
  expect({"--out", out}, kExitFailed, "id 49408 is outside the vocabulary [0, 49408)", "",
         tmp.File("bad_ids.safetensors"));
  REQUIRE(SaveSafetensors(tmp.File("long.safetensors"),
                          {{"input_ids", torch::zeros({1, 78}, torch::kInt64)}})
              .ok());
  expect({"--out", out}, kExitFailed, "1 to 77 tokens per row", "", tmp.File("long.safetensors"));
  REQUIRE(SaveSafetensors(tmp.File("no_ids.safetensors"), {{"ids", ids}}).ok());
  expect({"--out", out}, kExitFailed, "missing tensor input_ids", "",
         tmp.File("no_ids.safetensors"));
  expect({"--out", out}, kExitFailed, "does not exist", "", tmp.File("absent.safetensors"));
  // Older checkpoints carry the position_ids buffer: ignored.
  TensorMap with_buffer = MustLoad(dir + "/weights.safetensors");
  with_buffer["text_model.embeddings.position_ids"] = torch::arange(77).reshape({1, 77});
  auto model = std::make_shared<ClipTextModel>(*LoadClipTextConfig(dir + "/config.json"));
  CHECK(LoadClipTextWeights(*model, with_buffer).ok());
  // Weights that do not fit the config (API: no process needed).
  auto weights_error = [&](const std::string& config_json) {
    REQUIRE(h::WriteFile(tmp.File("c.json"), config_json));
    auto m = LoadClipTextModel(tmp.File("c.json"), dir + "/weights.safetensors");
    REQUIRE_FALSE(m.ok());
    return m.status().message();
  };
  const std::string base =
      R"("hidden_size": 32, "intermediate_size": 37, "num_attention_heads": 4)";
  CHECK(weights_error("{" + base + R"(, "num_hidden_layers": 2})")
            .find("unexpected keys: text_model.encoder.layers.2.") != std::string::npos);
  CHECK(weights_error("{" + base + R"(, "num_hidden_layers": 4})")
            .find("missing keys: text_model.encoder.layers.3.") != std::string::npos);
  CHECK(weights_error(R"({"hidden_size": 32, "intermediate_size": 36, "num_attention_heads": 4,
                          "num_hidden_layers": 3})")
            .find("shape mismatch for: text_model.encoder.layers.0.mlp.fc1.") != std::string::npos);
  REQUIRE(h::WriteFile(tmp.File("relu.json"), R"({"hidden_act": "relu", "hidden_size": 32})"));
  expect({"--out", out}, kExitFailed, "hidden_act \"relu\" is not supported",
         tmp.File("relu.json"));
}

TEST_CASE("CLIP text config: defaults, and what is not implemented is refused by name", "[text]") {
  Result<ClipTextConfig> c = ParseClipTextConfig(Json::object());
  REQUIRE(c.ok());
  CHECK(c->hidden_size == 512);
  CHECK(c->num_hidden_layers == 12);
  CHECK(c->eos_token_id == 49407);
  CHECK(c->hidden_act == ClipActivation::kQuickGelu);
  CHECK_FALSE(c->with_projection);
  auto refused = [](const char* json) {
    Result<ClipTextConfig> r = ParseClipTextConfig(*ParseJson(json));
    REQUIRE_FALSE(r.ok());
    return r.status().message();
  };
  CHECK(refused(R"({"model_type": "clip"})") ==
        "config: model_type \"clip\" is not supported (expected clip_text_model)");
  CHECK(refused(R"({"architectures": ["CLIPModel"]})") ==
        "config: architecture \"CLIPModel\" is not supported (CLIPTextModel, "
        "CLIPTextModelWithProjection)");
  CHECK(refused(R"({"hidden_act": "gelu_new"})") ==
        "config: hidden_act \"gelu_new\" is not supported (quick_gelu, gelu)");
  CHECK(refused(R"({"attention_dropout": 0.1})") == "config: attention_dropout must be 0");
  CHECK(refused(R"({"hidden_size": 30, "num_attention_heads": 4})") ==
        "config: hidden_size must be a multiple of num_attention_heads");
  CHECK(refused(R"({"num_hidden_layers": 0})").find("num_hidden_layers must be an integer") !=
        std::string::npos);
  CHECK(refused("[]") == "config: not a JSON object");
}

TEST_CASE("pooling takes the first eos, or the largest id for legacy eos_token_id 2", "[text]") {
  torch::manual_seed(1);
  torch::NoGradGuard no_grad;
  ClipTextConfig config = TinyConfig();
  config.eos_token_id = 7;
  ClipTextModel model(config);
  // Row 0: eos (7) at 2 and 4, largest id (40) at 3. Row 1: no eos -> position 0.
  torch::Tensor ids = torch::tensor({{1, 2, 7, 40, 7, 3}, {5, 6, 8, 9, 40, 2}}, torch::kInt64);
  ClipTextOutput y = model.forward(ids);
  CHECK(torch::equal(y.pooler_output[0], y.last_hidden_state[0][2]));
  CHECK(torch::equal(y.pooler_output[1], y.last_hidden_state[1][0]));
  config.eos_token_id = 2;  // legacy configs
  ClipTextModel legacy(config);
  y = legacy.forward(ids);
  CHECK(torch::equal(y.pooler_output[0], y.last_hidden_state[0][3]));
  CHECK(torch::equal(y.pooler_output[1], y.last_hidden_state[1][4]));
  CHECK_FALSE(y.text_embeds.defined());
  // Ties (SD 1.x pads with eos, the largest id): the first one, as PyTorch's argmax documents.
  torch::Tensor tied = torch::tensor({{1, 40, 3, 40, 40, 40}}, torch::kInt64);
  y = legacy.forward(tied);
  CHECK(torch::equal(y.pooler_output[0], y.last_hidden_state[0][1]));

  CHECK(ErrorOf(CheckInputIds(config, torch::zeros({6}, torch::kInt64))) ==
        "input_ids must be a 2-D integer tensor [batch, tokens]");
  CHECK(ErrorOf(CheckInputIds(config, torch::zeros({1, 6}))) ==
        "input_ids must be a 2-D integer tensor [batch, tokens]");
  CHECK(ErrorOf(CheckInputIds(config, torch::full({1, 6}, -1, torch::kInt64))) ==
        "input_ids: id -1 is outside the vocabulary [0, 50)");
  CHECK(ErrorOf(CheckInputIds(config, torch::zeros({1, 11}, torch::kInt64))) ==
        "input_ids must have 1 to 10 tokens per row");
}

TEST_CASE("text-encoder LoRA names, fresh adapters and file errors", "[text]") {
  torch::manual_seed(2);
  ClipTextConfig config = TinyConfig();
  ClipTextModel model(config);
  LoraAdapters lora = TextEncoderLora(model, TextEncoderRole::kSdxl1);
  REQUIRE(lora.Attach(4, 8.0, at::detail::createCPUGenerator(3)).ok());
  CHECK(lora.Parameters().size() == 16);
  TensorMap peft = lora.Tensors(LoraFormat::kPeft), kohya = lora.Tensors(LoraFormat::kKohya);
  CHECK(peft.count("text_encoder.text_model.encoder.layers.1.self_attn.out_proj.lora_B.weight"));
  CHECK(kohya.count("lora_te1_text_model_encoder_layers_1_self_attn_out_proj.lora_up.weight"));
  CHECK(kohya.at("lora_te1_text_model_encoder_layers_0_self_attn_k_proj.alpha").item<float>() == 8);
  CHECK(peft.size() == 16);
  CHECK(kohya.size() == 24);
  // Fresh B is zero: the adapters do not change the output yet.
  torch::Tensor ids = torch::tensor({{1, 2, 3, 49}}, torch::kInt64);
  {
    ClipTextModel plain(config);
    torch::NoGradGuard no_grad;
    for (const auto& p : model.named_parameters()) {
      plain.named_parameters()[p.key()].copy_(p.value());
    }
    CHECK(torch::equal(plain.forward(ids).last_hidden_state, model.forward(ids).last_hidden_state));
  }
  CHECK(lora.Attach(0, 1, at::detail::createCPUGenerator(3)).message() ==
        "LoRA rank must be in [1, 1024]");

  // Reading back: a kohya file with an SDXL and a UNet component next to ours.
  kohya["lora_unet_mid_block_attentions_0_proj_in.lora_down.weight"] = torch::zeros({4, 8});
  ClipTextModel other(config);
  LoraAdapters back = TextEncoderLora(other, TextEncoderRole::kSdxl1);
  std::set<std::string> used;
  REQUIRE(back.Read(kohya, {}, &used).ok());
  CHECK(used.size() == 24);
  CHECK(back.alpha() == 8);
  CHECK(torch::equal(back.Tensors(LoraFormat::kPeft).begin()->second, peft.begin()->second));
  Result<TextEncoderRole> role = TextEncoderRoleIn(kohya, false);
  REQUIRE(role.ok());
  CHECK(*role == TextEncoderRole::kSdxl1);

  auto read_error = [&](TensorMap file, std::map<std::string, std::string> meta = {}) {
    ClipTextModel m(config);
    LoraAdapters l = TextEncoderLora(m, TextEncoderRole::kSdxl1);
    std::set<std::string> u;
    return ErrorOf(l.Read(file, meta, &u));
  };
  TensorMap bad = peft;
  bad.erase("text_encoder.text_model.encoder.layers.0.self_attn.q_proj.lora_A.weight");
  CHECK(
      read_error(bad) ==
      "LoRA: missing key text_encoder.text_model.encoder.layers.0.self_attn.q_proj.lora_A.weight");
  bad = peft;
  bad["text_encoder.text_model.encoder.layers.0.mlp.fc1.lora_A.weight"] = torch::zeros({4, 8});
  CHECK(read_error(bad) ==
        "LoRA: unexpected key text_encoder.text_model.encoder.layers.0.mlp.fc1.lora_A.weight");
  bad = peft;
  bad["text_encoder.text_model.encoder.layers.1.self_attn.v_proj.lora_A.weight"] =
      torch::zeros({2, 8});
  CHECK(read_error(bad).find("must be float [r, 8] / [8, r]") != std::string::npos);
  bad = peft;
  bad["lora_te1_text_model_encoder_layers_0_self_attn_q_proj.alpha"] = torch::ones({});
  CHECK(read_error(bad) == "LoRA: both PEFT (text_encoder.) and kohya (lora_te1_) keys");
  CHECK(read_error(peft, {{"alpha", "four"}}) == "LoRA: metadata alpha \"four\" is not a number");
  CHECK(
      read_error({{"unet.x.lora_A.weight", torch::zeros({1})}}).find("no keys for text_encoder") !=
      std::string::npos);
  CHECK_FALSE(TextEncoderRoleIn({{"unet.x.lora_A.weight", torch::zeros({1})}}, true).ok());
}
