// The T5 v1.1 encoder (FLUX.1's text_encoder_2): transformers' reference output (API and
// `gleaner-train text-encode`), bf16 and fp8 frozen weights, the relative-position bucket rule,
// attention with an additive bias on every kernel, config rules, and one clear error for every
// spoiled config field or file.
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <limits>
#undef CHECK  // glog's (via libtorch); Catch2's must win
#include <catch2/catch.hpp>

#include "agent/protocol/trainer_protocol.h"
#include "agent/train/models/text/t5_encoder.h"
#include "agent/train/nn/attention.h"
#include "agent/train/nn/torch_compat.h"
#include "tests/skip.h"
#include "text_test_util.h"

using namespace gleaner;
using namespace gleaner::train;
using namespace gleaner::train::text;
using namespace gleaner::train::text::testing;
namespace h = gleaner::testing;
using torch::Tensor;

namespace {

#define SKIP_WITHOUT_T5_FIXTURE()                                                       \
  if (!FileExists(FixtureSet("t5-encoder-ref-a") + "/model.safetensors")) {             \
    GLEANER_SKIP("fixtures not found under " GLEANER_FIXTURES_DIR "/t5-encoder-ref-a"); \
  }

TensorMap MustLoad(const std::string& path) {
  Result<TensorMap> r = LoadSafetensors(path);
  if (!r.ok()) FAIL(r.status().ToString());
  return *r;
}

std::shared_ptr<T5Encoder> MustEncoder(const std::string& dir,
                                       const BasePlacement& placement = {}) {
  auto m = LoadT5Encoder(dir + "/config.json", dir + "/model.safetensors", placement);
  if (!m.ok()) FAIL(m.status().ToString());
  return *m;
}

double MaxAbs(const Tensor& a, const Tensor& b) {
  return (a.to(torch::kFloat64) - b.to(torch::kFloat64)).abs().max().item<double>();
}
double RelL2(const Tensor& a, const Tensor& ref) {
  Tensor r = ref.to(torch::kFloat64);
  return ((a.to(torch::kFloat64) - r).norm() / r.norm()).item<double>();
}

// The README's tolerances: last_hidden_state rel-L2 <= 1e-5, max|d| <= 1e-4.
void CheckReference(const Tensor& got, const Tensor& ref) {
  REQUIRE(got.sizes() == ref.sizes());
  CHECK(got.scalar_type() == torch::kFloat32);
  CHECK(RelL2(got, ref) <= 1e-5);
  CHECK(MaxAbs(got, ref) <= 1e-4);
}

T5Config TinyConfig() {
  T5Config c;
  c.vocab_size = 40;
  c.d_model = 12;
  c.d_kv = 5;  // inner 15 != d_model
  c.d_ff = 16;
  c.num_layers = 2;
  c.num_heads = 3;
  c.relative_attention_num_buckets = 8;
  c.relative_attention_max_distance = 10;
  return c;
}

std::string ErrorOf(const Status& s) {
  REQUIRE_FALSE(s.ok());
  return s.message();
}

// softmax(q k^T * scale + bias) v in float64 from [B, L, H*d] inputs; bias [B|1, H, Lq, Lk].
Tensor BiasReference(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads, double scale,
                     const Tensor& bias) {
  auto split = [&](const Tensor& t) {
    return t.to(torch::kFloat64)
        .reshape({t.size(0), t.size(1), heads, t.size(2) / heads})
        .permute({0, 2, 1, 3});
  };
  Tensor scores = torch::matmul(split(q), split(k).transpose(-1, -2)) * scale;
  scores = scores + bias.to(torch::kFloat64);
  Tensor y = torch::matmul(scores.softmax(-1), split(v));
  return y.permute({0, 2, 1, 3}).reshape({q.size(0), q.size(1), v.size(2)});
}

}  // namespace

TEST_CASE("t5-encoder matches transformers' T5EncoderModel", "[t5][text][fixture]") {
  SKIP_WITHOUT_T5_FIXTURE();
  torch::NoGradGuard no_grad;
  for (const std::string& set : ReferenceSets("t5-encoder", "model.safetensors")) {
    INFO(set);
    TensorMap inputs = MustLoad(set + "/inputs.safetensors");
    Tensor ref = MustLoad(set + "/output.safetensors").at("last_hidden_state");
    auto model = MustEncoder(set);
    const Tensor& ids = inputs.at("input_ids");
    REQUIRE(CheckT5InputIds(model->config(), ids).ok());
    CheckReference(model->forward(ids), ref);

    // The token embedding under its tied name, alone or next to shared.weight.
    TensorMap weights = MustLoad(set + "/model.safetensors");
    TensorMap tied = weights;
    tied["encoder.embed_tokens.weight"] = tied.at("shared.weight");
    tied.erase("shared.weight");
    T5Encoder from_tied(model->config(), BasePlacement{});
    REQUIRE(LoadT5Weights(from_tied, tied).ok());
    CheckReference(from_tied.forward(ids), ref);
    tied["shared.weight"] = weights.at("shared.weight");
    T5Encoder from_both(model->config(), BasePlacement{});
    REQUIRE(LoadT5Weights(from_both, tied).ok());
    CheckReference(from_both.forward(ids), ref);
    for (const auto& p : from_both.parameters()) CHECK_FALSE(p.requires_grad());
  }
}

TEST_CASE("t5-encoder holds frozen bf16 (and fp8 where libtorch has it) weights",
          "[t5][text][fixture]") {
  SKIP_WITHOUT_T5_FIXTURE();
  torch::NoGradGuard no_grad;
  const std::string set = FixtureSet("t5-encoder-ref-a");
  Tensor ids = MustLoad(set + "/inputs.safetensors").at("input_ids");
  Tensor ref = MustLoad(set + "/output.safetensors").at("last_hidden_state");
  BasePlacement bf16;
  bf16.dtype = torch::kBFloat16;
  auto model = MustEncoder(set, bf16);
  for (const auto& p : model->named_parameters()) {
    INFO(p.key());
    CHECK(p.value().scalar_type() == torch::kBFloat16);
  }
  Tensor y = model->forward(ids);
  CHECK(y.scalar_type() == torch::kBFloat16);
  REQUIRE(y.sizes() == ref.sizes());
  CHECK(RelL2(y, ref) <= 2e-2);  // bf16 weights and activations; norms and softmax in fp32

  BasePlacement fp8 = bf16;
  fp8.fp8_linear = true;
  auto loaded = LoadT5Encoder(set + "/config.json", set + "/model.safetensors", fp8);
  if (!kHasFp8) {
    REQUIRE_FALSE(loaded.ok());
    CHECK(loaded.status().message().find("fp8 base weights need libtorch 2.1 or newer") !=
          std::string::npos);
    return;
  }
  REQUIRE(loaded.ok());
  auto params = (*loaded)->named_parameters();
  CHECK(IsFp8(params["encoder.block.1.layer.1.DenseReluDense.wo.weight"]));
  CHECK(IsFp8(params["encoder.block.0.layer.0.SelfAttention.q.weight"]));
  CHECK(params["shared.weight"].scalar_type() == torch::kBFloat16);
  CHECK(params["encoder.final_layer_norm.weight"].scalar_type() == torch::kBFloat16);
  CHECK(RelL2((*loaded)->forward(ids), ref) <= 1e-1);
}

TEST_CASE("text-encode picks T5 from the config and writes last_hidden_state",
          "[t5][text][cli][fixture]") {
  SKIP_WITHOUT_T5_FIXTURE();
  const std::string set = FixtureSet("t5-encoder-ref-a");
  h::TempDir tmp("gleaner-t5-encode");
  auto args = [&](const std::string& config, const std::string& inputs) {
    return std::vector<std::string>{"text-encode",
                                    "--config",
                                    config,
                                    "--weights",
                                    set + "/model.safetensors",
                                    "--inputs",
                                    inputs,
                                    "--out",
                                    tmp.File("out.safetensors")};
  };
  CliRun run = RunTrainCli(args(set + "/config.json", set + "/inputs.safetensors"), tmp.path());
  INFO(run.err);
  REQUIRE(run.code == 0);
  TensorMap out = MustLoad(tmp.File("out.safetensors"));
  CHECK(out.size() == 1);
  CheckReference(out.at("last_hidden_state"),
                 MustLoad(set + "/output.safetensors").at("last_hidden_state"));

  // architectures ["T5EncoderModel"] without model_type picks T5 too.
  Result<std::string> text = ReadFile(set + "/config.json");
  REQUIRE(text.ok());
  Json config = *ParseJson(*text);
  config.erase("model_type");
  config["architectures"] = Json::array({"T5EncoderModel"});
  REQUIRE(h::WriteFile(tmp.File("arch.json"), config.dump()));
  run = RunTrainCli(args(tmp.File("arch.json"), set + "/inputs.safetensors"), tmp.path());
  INFO(run.err);
  REQUIRE(run.code == 0);
  CheckReference(MustLoad(tmp.File("out.safetensors")).at("last_hidden_state"),
                 MustLoad(set + "/output.safetensors").at("last_hidden_state"));
}

TEST_CASE("text-encode refuses a bad T5 config, weights or ids with one line",
          "[t5][text][cli][fixture]") {
  SKIP_WITHOUT_T5_FIXTURE();
  const std::string set = FixtureSet("t5-encoder-ref-a");
  h::TempDir tmp("gleaner-t5-encode-bad");
  Result<std::string> text = ReadFile(set + "/config.json");
  REQUIRE(text.ok());
  const Json config = *ParseJson(*text);
  auto expect = [&](const Json& cfg, std::vector<std::string> extra, const std::string& message,
                    const std::string& inputs = "") {
    REQUIRE(h::WriteFile(tmp.File("config.json"), cfg.dump()));
    std::vector<std::string> a = {"text-encode",
                                  "--config",
                                  tmp.File("config.json"),
                                  "--weights",
                                  set + "/model.safetensors",
                                  "--inputs",
                                  inputs.empty() ? set + "/inputs.safetensors" : inputs,
                                  "--out",
                                  tmp.File("o.safetensors")};
    a.insert(a.end(), extra.begin(), extra.end());
    CliRun r = RunTrainCli(a, tmp.path());
    INFO(r.err);
    CHECK(r.code == kExitFailed);
    CHECK(r.err.find(message) != std::string::npos);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  };
  auto with = [&](const char* key, const Json& value) {
    Json c = config;
    c[key] = value;
    return c;
  };
  expect(config, {"--lora", set + "/model.safetensors"}, "--lora is for CLIP text encoders");
  expect(config, {"--grad-weights", set + "/inputs.safetensors"},
         "--grad-weights is for CLIP text encoders");
  expect(with("feed_forward_proj", "relu"), {},
         "feed_forward_proj \"relu\" is not supported (gated-gelu, T5 v1.1)");
  expect(with("d_ff", 41), {},
         "shape mismatch for: encoder.block.0.layer.1.DenseReluDense.wi_0.weight");
  expect(with("num_layers", 3), {}, "missing keys: encoder.block.2.");
  expect(with("num_layers", 1), {}, "unexpected keys: encoder.block.1.");
  expect(with("d_kv", 16), {}, "shape mismatch for: encoder.block.0.layer.0.SelfAttention.k");
  expect(with("vocab_size", 1 << 24), {}, "shape mismatch for: shared.weight");
  expect(with("relative_attention_num_buckets", 64), {},
         "shape mismatch for: encoder.block.0.layer.0.SelfAttention.relative_attention_bias");
  expect(with("d_model", "32"), {}, "d_model must be an integer in [1, 65536]");

  TensorMap inputs = MustLoad(set + "/inputs.safetensors");
  Tensor ids = inputs.at("input_ids").clone();
  ids.index_put_({1, 5}, 32128);
  REQUIRE(SaveSafetensors(tmp.File("bad_ids.safetensors"), {{"input_ids", ids}}).ok());
  expect(config, {}, "id 32128 is outside the vocabulary [0, 32128)",
         tmp.File("bad_ids.safetensors"));
  REQUIRE(SaveSafetensors(tmp.File("float_ids.safetensors"), {{"input_ids", torch::zeros({1, 4})}})
              .ok());
  expect(config, {}, "input_ids must be a 2-D integer tensor", tmp.File("float_ids.safetensors"));
  REQUIRE(SaveSafetensors(tmp.File("no_ids.safetensors"), {{"ids", ids}}).ok());
  expect(config, {}, "missing tensor input_ids", tmp.File("no_ids.safetensors"));
  // Weights of another model (the fixture's inputs file as weights): named keys missing.
  {
    std::vector<std::string> a = {"text-encode",
                                  "--config",
                                  set + "/config.json",
                                  "--weights",
                                  set + "/inputs.safetensors",
                                  "--inputs",
                                  set + "/inputs.safetensors",
                                  "--out",
                                  tmp.File("o.safetensors")};
    CliRun r = RunTrainCli(a, tmp.path());
    INFO(r.err);
    CHECK(r.code == kExitFailed);
    CHECK(r.err.find("T5 encoder weights: missing keys: encoder.block.0.") != std::string::npos);
  }
}

TEST_CASE("t5 config: defaults, the fixture's config, and every spoiled field refused by name",
          "[t5][text]") {
  Result<T5Config> d = ParseT5Config(*ParseJson(R"({"feed_forward_proj": "gated-gelu"})"));
  REQUIRE(d.ok());
  CHECK(d->vocab_size == 32128);
  CHECK(d->d_model == 512);
  CHECK(d->d_kv == 64);
  CHECK(d->num_heads == 8);
  CHECK(d->num_layers == 6);
  CHECK(d->relative_attention_num_buckets == 32);
  CHECK(d->relative_attention_max_distance == 128);
  CHECK(d->layer_norm_epsilon == 1e-6);
  // The round trip through T5ConfigToJson describes the same model.
  Result<T5Config> back = ParseT5Config(T5ConfigToJson(TinyConfig()));
  REQUIRE(back.ok());
  CHECK(T5ParameterShapes(*back) == T5ParameterShapes(TinyConfig()));
  CHECK(IsT5Config(T5ConfigToJson(TinyConfig())));
  CHECK(IsT5Config(*ParseJson(R"({"model_type": "t5"})")));
  CHECK(IsT5Config(*ParseJson(R"({"architectures": ["T5EncoderModel"]})")));
  CHECK_FALSE(IsT5Config(*ParseJson(R"({"model_type": "clip_text_model"})")));
  CHECK_FALSE(IsT5Config(*ParseJson(R"({"model_type": 5, "architectures": "T5EncoderModel"})")));
  CHECK_FALSE(IsT5Config(*ParseJson("[]")));

  // FLUX.1's text_encoder_2/config.json (T5-XXL v1.1): dropout_rate 0.1 is read, not refused.
  Result<T5Config> xxl = ParseT5Config(*ParseJson(R"({
    "architectures": ["T5EncoderModel"], "classifier_dropout": 0.0, "d_ff": 10240, "d_kv": 64,
    "d_model": 4096, "decoder_start_token_id": 0, "dense_act_fn": "gelu_new", "dropout_rate": 0.1,
    "eos_token_id": 1, "feed_forward_proj": "gated-gelu", "initializer_factor": 1.0,
    "is_encoder_decoder": true, "is_gated_act": true, "layer_norm_epsilon": 1e-06,
    "model_type": "t5", "num_decoder_layers": 24, "num_heads": 64, "num_layers": 24,
    "output_past": true, "pad_token_id": 0, "relative_attention_max_distance": 128,
    "relative_attention_num_buckets": 32, "tie_word_embeddings": false,
    "torch_dtype": "bfloat16", "transformers_version": "4.43.3", "use_cache": true,
    "vocab_size": 32128})"));
  REQUIRE(xxl.ok());
  CHECK(xxl->inner_dim() == 4096);
  CHECK(xxl->num_layers == 24);
  CHECK(xxl->dropout_rate == 0.1);

  const Json base = T5ConfigToJson(TinyConfig());
  auto refused = [&](const char* key, const Json& value) {
    Json c = base;
    c[key] = value;
    Result<T5Config> r = ParseT5Config(c);
    INFO(key << " = " << value.dump());
    REQUIRE_FALSE(r.ok());
    return r.status().message();
  };
  // Every integer field: a string, a fraction, zero or less, too large.
  struct IntField {
    const char* key;
    int64_t min, max;
  };
  const IntField ints[] = {{"vocab_size", 1, int64_t(1) << 24},
                           {"d_model", 1, 1 << 16},
                           {"d_kv", 1, 1 << 12},
                           {"d_ff", 1, 1 << 18},
                           {"num_layers", 1, 256},
                           {"num_heads", 1, 1024},
                           {"relative_attention_num_buckets", 4, 1 << 16},
                           {"relative_attention_max_distance", 1, 1 << 24}};
  for (const IntField& f : ints) {
    const std::string message = "config: " + std::string(f.key) + " must be an integer in [" +
                                std::to_string(f.min) + ", " + std::to_string(f.max) + "]";
    for (const Json& bad : {Json("8"), Json(2.5), Json(f.min - 1), Json(f.max + 1), Json(true),
                            Json::array({8}), Json(-1e300)}) {
      CHECK(refused(f.key, bad) == message);
    }
  }
  for (const char* key : {"pad_token_id", "eos_token_id"}) {
    CHECK(refused(key, -1).find(std::string(key) + " must be an integer") != std::string::npos);
    CHECK(refused(key, "1").find(std::string(key) + " must be an integer") != std::string::npos);
    CHECK(refused(key, 40) == "config: eos_token_id and pad_token_id must be below vocab_size");
  }
  CHECK(refused("layer_norm_epsilon", 0) == "config: layer_norm_epsilon must be greater than 0");
  CHECK(refused("layer_norm_epsilon", 2).find("layer_norm_epsilon must be a number in [0") !=
        std::string::npos);
  CHECK(refused("layer_norm_epsilon", "1e-6") == "config: layer_norm_epsilon must be a number");
  CHECK(refused("dropout_rate", -0.1).find("dropout_rate must be a number in [0") !=
        std::string::npos);
  CHECK(refused("model_type", "t5gemma") ==
        "config: model_type \"t5gemma\" is not supported (expected t5)");
  CHECK(refused("model_type", 5) == "config: model_type must be a string");
  CHECK(refused("architectures", Json::array({"T5ForConditionalGeneration"})) ==
        "config: architecture \"T5ForConditionalGeneration\" is not supported (T5EncoderModel)");
  CHECK(refused("architectures", "T5EncoderModel") ==
        "config: architectures must be a list of one name");
  CHECK(refused("architectures", Json::array({"T5EncoderModel", "T5Model"})) ==
        "config: architectures must be a list of one name");
  CHECK(refused("feed_forward_proj", "gated-silu") ==
        "config: feed_forward_proj \"gated-silu\" is not supported (gated-gelu, T5 v1.1)");
  CHECK(refused("feed_forward_proj", Json::object()) ==
        "config: feed_forward_proj must be a string");
  CHECK(refused("dense_act_fn", "gelu") ==
        "config: dense_act_fn \"gelu\" is not supported with gated-gelu (gelu_new)");
  CHECK(refused("is_gated_act", false) == "config: is_gated_act must be true with gated-gelu");
  CHECK(refused("is_gated_act", "yes") == "config: is_gated_act must be true or false");
  // max_exact = 8 / 4 = 2 exact offsets per direction: max_distance must reach past them.
  CHECK(refused("relative_attention_max_distance", 2) ==
        "config: relative_attention_max_distance must be greater than 2 "
        "(relative_attention_num_buckets / 4)");
  Result<T5Config> no_ffn = ParseT5Config(Json::object());
  REQUIRE_FALSE(no_ffn.ok());  // transformers' default is the original T5's relu
  CHECK(no_ffn.status().message() ==
        "config: feed_forward_proj \"relu\" is not supported (gated-gelu, T5 v1.1)");
  CHECK(ParseT5Config(*ParseJson("[]")).status().message() == "config: not a JSON object");
  CHECK(ParseT5Config(*ParseJson("null")).status().message() == "config: not a JSON object");
  CHECK(LoadT5Config("/nonexistent/config.json").status().message().find("does not exist") !=
        std::string::npos);
}

TEST_CASE("t5 relative position buckets follow transformers' bidirectional rule", "[t5][text]") {
  // 32 buckets, max distance 128: 16 per direction (key after query: +16), offsets 0..7 exact,
  // 8..127 log-spaced over buckets 8..15, beyond that 15.
  Tensor b = RelativePositionBuckets(201, 32, 128);
  REQUIRE(b.sizes() == torch::IntArrayRef({201, 201}));
  CHECK(b.scalar_type() == torch::kLong);
  auto at = [&](int64_t q, int64_t k) { return b[q][k].item<int64_t>(); };
  CHECK(at(5, 5) == 0);
  CHECK(at(3, 0) == 3);
  CHECK(at(0, 3) == 19);
  CHECK(at(8, 0) == 8);
  CHECK(at(0, 8) == 24);
  CHECK(at(12, 0) == 9);   // 8 + floor(8 log(12/8) / log(16)) = 8 + 1
  CHECK(at(0, 20) == 26);  // 16 + 8 + floor(2.64)
  CHECK(at(20, 0) == 10);
  CHECK(at(100, 0) == 15);  // 8 + floor(7.29)
  CHECK(at(0, 100) == 31);
  CHECK(at(200, 0) == 15);  // past max_distance
  CHECK(at(0, 200) == 31);
  CHECK(b.min().item<int64_t>() == 0);
  CHECK(b.max().item<int64_t>() == 31);
  // Depends on the offset only.
  CHECK(torch::equal(b.index({torch::indexing::Slice(1, 201), torch::indexing::Slice(1, 201)}),
                     b.index({torch::indexing::Slice(0, 200), torch::indexing::Slice(0, 200)})));
  // Odd and minimal bucket counts stay inside the table.
  for (int64_t n : {4, 5, 9}) {
    Tensor t = RelativePositionBuckets(50, n, n / 4 + 1);
    CHECK(t.min().item<int64_t>() >= 0);
    CHECK(t.max().item<int64_t>() < n);
  }
}

TEST_CASE("attention adds a bias (t5 position bias) on every kernel of this libtorch",
          "[t5][attention]") {
  std::vector<AttentionKernel> kernels = {AttentionKernel::kExplicit};
  if (kHasFusedAttention) kernels.push_back(AttentionKernel::kFused);
  for (AttentionKernel kernel : kernels) {
    for (int64_t bias_batch : {1, 2}) {
      for (bool upcast : {false, true}) {
        torch::manual_seed(4);
        const int64_t batch = 2, l = 7, heads = 3, d = 8;
        Tensor q = torch::randn({batch, l, heads * d}), k = torch::randn({batch, l, heads * d}),
               v = torch::randn({batch, l, heads * d});
        Tensor bias = torch::randn({bias_batch, heads, l, l}) * 3;
        AttentionOptions o;
        o.heads = heads;
        o.scale = 1.0;
        o.upcast = upcast;
        o.kernel = kernel;
        o.bias = bias;
        INFO("fused " << (kernel == AttentionKernel::kFused) << " bias batch " << bias_batch
                      << " upcast " << upcast);
        Tensor y = MultiHeadAttention(q, k, v, o);
        REQUIRE(y.sizes() == q.sizes());
        CHECK(RelL2(y, BiasReference(q, k, v, heads, 1.0, bias)) <= 1e-6);
        // The same through a non-contiguous view (as T5 passes its permuted table).
        o.bias = bias.permute({0, 1, 3, 2}).contiguous().permute({0, 1, 3, 2});
        CHECK(RelL2(MultiHeadAttention(q, k, v, o), BiasReference(q, k, v, heads, 1.0, bias)) <=
              1e-6);
      }
    }
  }
  AttentionOptions both;
  both.bias = torch::zeros({1, 1, 2, 2});
  both.causal = true;
  Tensor x = torch::randn({1, 2, 4});
  CHECK_THROWS_WITH(MultiHeadAttention(x, x, x, both),
                    Catch::Contains("attention: bias and causal are exclusive"));
}

TEST_CASE("t5-encoder: shapes, ids, fresh and hollow models, weight errors", "[t5][text]") {
  torch::manual_seed(5);
  torch::NoGradGuard no_grad;
  const T5Config c = TinyConfig();
  T5Encoder model(c);
  CHECK(model.parameter_shapes() == T5ParameterShapes(c));
  std::map<std::string, std::vector<int64_t>> named;
  for (const auto& p : model.named_parameters()) named[p.key()] = p.value().sizes().vec();
  CHECK(named == T5ParameterShapes(c));
  CHECK(named.at("encoder.block.1.layer.0.SelfAttention.o.weight") == std::vector<int64_t>{12, 15});
  CHECK_FALSE(named.count("encoder.block.1.layer.0.SelfAttention.relative_attention_bias.weight"));

  Tensor ids = torch::tensor({{1, 2, 3, 39, 1, 0}, {5, 6, 7, 1, 0, 0}}, torch::kInt64);
  Tensor y = model.forward(ids);
  CHECK(y.sizes() == torch::IntArrayRef({2, 6, 12}));
  CHECK(torch::isfinite(y).all().item<bool>());
  // No attention mask and bidirectional: a token's output depends on a later pad.
  Tensor ids2 = ids.clone();
  ids2.index_put_({0, 5}, 7);
  CHECK_FALSE(torch::allclose(model.forward(ids2)[0][0], y[0][0]));
  CHECK(torch::equal(model.forward(ids2)[1], y[1]));
  // int32 ids give the same output.
  CHECK(torch::equal(model.forward(ids.to(torch::kInt32)), y));

  // A hollow model takes the fresh model's weights, also in bf16.
  TensorMap weights;
  for (const auto& p : model.named_parameters()) weights[p.key()] = p.value().clone();
  T5Encoder hollow(c, BasePlacement{});
  REQUIRE(LoadT5Weights(hollow, weights).ok());
  CHECK(torch::equal(hollow.forward(ids), y));
  BasePlacement bf16;
  bf16.dtype = torch::kBFloat16;
  T5Encoder half(c, bf16);
  REQUIRE(LoadT5Weights(half, weights).ok());
  CHECK(RelL2(half.forward(ids), y) <= 3e-2);

  CHECK(ErrorOf(CheckT5InputIds(c, torch::zeros({6}, torch::kInt64))) ==
        "input_ids must be a 2-D integer tensor [batch, tokens]");
  CHECK(ErrorOf(CheckT5InputIds(c, torch::zeros({1, 6}, torch::kBool))) ==
        "input_ids must be a 2-D integer tensor [batch, tokens]");
  CHECK(ErrorOf(CheckT5InputIds(c, torch::zeros({1, 0}, torch::kInt64))) ==
        "input_ids must have at least one row and one token");
  CHECK(ErrorOf(CheckT5InputIds(c, torch::full({1, 3}, -2, torch::kInt64))) ==
        "input_ids: id -2 is outside the vocabulary [0, 40)");
  CHECK(CheckT5InputIds(c, torch::full({1, 300}, 39, torch::kInt32)).ok());

  auto load_error = [&](const TensorMap& w, const BasePlacement& placement = {}) {
    T5Encoder m(c, placement);
    return ErrorOf(LoadT5Weights(m, w));
  };
  TensorMap bad = weights;
  bad.erase("encoder.final_layer_norm.weight");
  CHECK(load_error(bad) == "T5 encoder weights: missing keys: encoder.final_layer_norm.weight");
  bad = weights;
  bad["encoder.block.1.layer.0.SelfAttention.relative_attention_bias.weight"] =
      torch::zeros({8, 3});
  CHECK(load_error(bad) ==
        "T5 encoder weights: unexpected keys: "
        "encoder.block.1.layer.0.SelfAttention.relative_attention_bias.weight");
  bad = weights;
  bad["encoder.block.0.layer.1.layer_norm.weight"] = torch::zeros({12}, torch::kInt64);
  CHECK(load_error(bad) ==
        "T5 encoder weights: shape mismatch for: "
        "encoder.block.0.layer.1.layer_norm.weight (not a float tensor)");
  BasePlacement doubles;
  doubles.dtype = torch::kFloat64;
  CHECK(load_error(weights, doubles) ==
        "T5 encoder weights: the base dtype must be F32, BF16 or F16");
}
