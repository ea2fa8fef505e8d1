// The text-to-image pipeline on tiny modules built in code (SD- and SDXL-shaped): deterministic
// images, SDXL's zero negative conditioning, guidance 1 = the conditional path, and a training
// run's state left as it was.
#include "agent/train/sampling/text_to_image.h"

#include "agent/train/models/unet/unet_lora.h"
#include "agent/train/models/vae/image_latents.h"
#include "tests/unit/train/train_test_util.h"

namespace gleaner::train::testing {
namespace {

using sampling::ImageRequest;
using sampling::TextToImageModel;

constexpr const char* kVocab =
    R"({"a": 0, "b": 1, "a</w>": 2, "b</w>": 3, "aa": 4, "ab</w>": 5, "!": 6,
        "<|startoftext|>": 7, "<|endoftext|>": 8})";
constexpr const char* kMerges = "#version: 0.2\na a\na b</w>\n";

sampling::PromptEncoder TinyEncoder(int64_t width, bool projection, uint64_t seed) {
  text::ClipTextConfig c;
  c.vocab_size = 16;
  c.hidden_size = width;
  c.intermediate_size = 2 * width;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 2;
  c.max_position_embeddings = 12;
  c.projection_dim = 32;
  c.with_projection = projection;
  c.eos_token_id = 8;
  torch::manual_seed(seed);
  Result<text::ClipTokenizer> tok = text::ClipTokenizer::FromFiles(kVocab, kMerges);
  REQUIRE(tok.ok());
  return {*tok, std::make_shared<text::ClipTextModel>(c)};
}

TextToImageModel TinyModel(bool sdxl) {
  TextToImageModel m;
  UNetConfig u = sdxl ? TinySdxlConfig() : TinyConfig();
  auto net = std::make_shared<UNet>(u, BasePlacement{});
  REQUIRE(LoadStateDict(*net, RandomWeights(u, 3)).ok());
  m.denoiser = net;
  if (sdxl) {
    m.encoders = {TinyEncoder(16, false, 5), TinyEncoder(16, true, 6)};
  } else {
    m.encoders = {TinyEncoder(32, false, 5)};
  }
  Result<vae::VaeConfig> v =
      vae::ParseVaeConfig(Json{{"block_out_channels", {8, 8}},
                               {"down_block_types", {"DownEncoderBlock2D", "DownEncoderBlock2D"}},
                               {"up_block_types", {"UpDecoderBlock2D", "UpDecoderBlock2D"}},
                               {"latent_channels", 4},
                               {"norm_num_groups", 4},
                               {"scaling_factor", 0.5}});
  REQUIRE(v.ok());
  torch::manual_seed(7);
  m.vae = std::make_shared<vae::AutoencoderKL>(*v);
  Result<sampling::SchedulerConfig> s =
      sampling::ParseSchedulerConfig(Json{{"_class_name", "EulerDiscreteScheduler"},
                                          {"beta_schedule", "scaled_linear"},
                                          {"beta_start", 0.00085},
                                          {"beta_end", 0.012},
                                          {"timestep_spacing", "leading"},
                                          {"steps_offset", 1}},
                                     sampling::SamplerKind::kEuler);
  REQUIRE(s.ok());
  m.scheduler = *s;
  REQUIRE(sampling::CheckTextToImageModel(m).ok());
  return m;
}

ImageRequest Request(const std::string& prompt, const std::string& negative = "") {
  ImageRequest r;
  r.prompt = prompt;
  r.negative_prompt = negative;
  r.steps = 4;
  r.guidance_scale = 5;
  r.seed = 11;
  r.height = 32;
  r.width = 32;
  return r;
}

torch::Tensor Render(const TextToImageModel& m, const ImageRequest& r) {
  Result<torch::Tensor> img = sampling::RenderImage(m, r);
  REQUIRE(img.ok());
  REQUIRE(img->defined());
  return *img;
}

// The ids a prompt becomes, [1, 12].
torch::Tensor Ids(const text::ClipTokenizer& tokenizer, const std::string& prompt) {
  Result<std::vector<int32_t>> ids = tokenizer.Encode(prompt, 12);
  REQUIRE(ids.ok());
  std::vector<int64_t> wide(ids->begin(), ids->end());
  return torch::tensor(wide).view({1, 12});
}

int64_t MaxDiff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kInt32) - b.to(torch::kInt32)).abs().max().item<int64_t>();
}

}  // namespace

TEST_CASE(
    "text to image: uint8 RGB that is deterministic for a seed and changed by seed and prompt",
    "[sampling]") {
  for (bool sdxl : {false, true}) {
    INFO("sdxl " << sdxl);
    TextToImageModel m = TinyModel(sdxl);
    torch::Tensor a = Render(m, Request("a b"));
    CHECK(a.sizes() == torch::IntArrayRef({1, 3, 32, 32}));
    CHECK(a.scalar_type() == torch::kUInt8);
    CHECK(torch::equal(a, Render(m, Request("a b"))));
    ImageRequest other_seed = Request("a b");
    other_seed.seed = 12;
    CHECK_FALSE(torch::equal(a, Render(m, other_seed)));
    CHECK_FALSE(torch::equal(a, Render(m, Request("b a"))));
    CHECK_FALSE(torch::equal(a, Render(m, Request("a b", "aa"))));
    Result<std::vector<std::string>> png = vae::EncodePngs(a);
    REQUIRE(png.ok());
    CHECK(png->size() == 1);
  }
}

TEST_CASE("text to image: SDXL conditioning with zero negative embeddings for an empty negative",
          "[sampling]") {
  TextToImageModel m = TinyModel(true);
  torch::NoGradGuard no_grad;
  ImageRequest r = Request("a b");
  r.height = 24;
  r.width = 40;
  Result<Conditioning> c = sampling::EncodeConditioning(m, r);
  REQUIRE(c.ok());
  CHECK(c->text.sizes() == torch::IntArrayRef({2, 12, 32}));
  CHECK(c->pooled.sizes() == torch::IntArrayRef({2, 32}));
  CHECK(torch::equal(c->text[0], torch::zeros_like(c->text[0])));
  CHECK(torch::equal(c->pooled[0], torch::zeros({32})));
  CHECK(c->text[1].abs().sum().item<double>() > 0);
  torch::Tensor ids = torch::tensor({24.f, 40.f, 0.f, 0.f, 24.f, 40.f});
  CHECK(torch::equal(c->time_ids[0], ids));
  CHECK(torch::equal(c->time_ids[1], ids));
  // The context is the two encoders' penultimate states side by side, the pooled part encoder
  // 2's projection.
  torch::Tensor t = Ids(m.encoders[0].tokenizer, "a b");
  text::ClipTextOutput o1 = m.encoders[0].model->forward(t), o2 = m.encoders[1].model->forward(t);
  CHECK(torch::equal(
      c->text[1], torch::cat({o1.penultimate_hidden_state, o2.penultimate_hidden_state}, -1)[0]));
  CHECK(torch::equal(c->pooled[1], o2.text_embeds[0]));
  // A negative prompt is encoded; without force_zeros_for_empty_prompt "" is encoded too.
  Result<Conditioning> neg = sampling::EncodeConditioning(m, Request("a b", "b"));
  REQUIRE(neg.ok());
  CHECK(neg->text[0].abs().sum().item<double>() > 0);
  m.force_zeros_for_empty_prompt = false;
  Result<Conditioning> empty = sampling::EncodeConditioning(m, Request("a b"));
  REQUIRE(empty.ok());
  CHECK(empty->pooled[0].abs().sum().item<double>() > 0);
  // Guidance 1 runs the conditional rows alone.
  r.guidance_scale = 1;
  Result<Conditioning> single = sampling::EncodeConditioning(m, r);
  REQUIRE(single.ok());
  CHECK(single->text.size(0) == 1);
  CHECK(torch::equal(single->text[0], c->text[1]));
}

TEST_CASE("text to image: SD 1.x conditions on the last hidden state and encodes an empty negative",
          "[sampling]") {
  TextToImageModel m = TinyModel(false);
  torch::NoGradGuard no_grad;
  Result<Conditioning> c = sampling::EncodeConditioning(m, Request("a b"));
  REQUIRE(c.ok());
  CHECK_FALSE(c->pooled.defined());
  auto last = [&](const std::string& p) {
    return m.encoders[0].model->forward(Ids(m.encoders[0].tokenizer, p)).last_hidden_state[0];
  };
  CHECK(torch::equal(c->text[0], last("")));
  CHECK(torch::equal(c->text[1], last("a b")));
}

TEST_CASE("text to image: guidance 1 equals guidance g with uncond = cond", "[sampling]") {
  for (bool sdxl : {false, true}) {
    INFO("sdxl " << sdxl);
    TextToImageModel m = TinyModel(sdxl);
    ImageRequest cond_only = Request("a b");
    cond_only.guidance_scale = 1;
    ImageRequest guided = Request("a b", "a b");  // ε_u = ε_c, so ε = ε_c for any g
    guided.guidance_scale = 6;
    // One image computed alone, the other in a batch of two: equal up to kernel rounding.
    CHECK(MaxDiff(Render(m, cond_only), Render(m, guided)) <= 1);
    CHECK(MaxDiff(Render(m, cond_only), Render(m, Request("a b", "b"))) > 1);
  }
}

TEST_CASE("text to image: leaves the training state as it was and can be stopped", "[sampling]") {
  TextToImageModel m = TinyModel(true);
  Result<DenoiserLora> lora =
      DenoiserLora::Attach(*m.denoiser, 4, 4, at::detail::createCPUGenerator(1));
  REQUIRE(lora.ok());
  {
    torch::NoGradGuard no_grad;
    for (torch::Tensor& p : lora->Parameters()) p.normal_(0, 0.1);
  }
  m.denoiser->module().train();
  TensorMap before = lora->PeftTensors();
  for (auto& [k, v] : before) v = v.clone();
  torch::Tensor rng = at::detail::getDefaultCPUGenerator().get_state();
  torch::Tensor with_lora = Render(m, Request("a b"));
  CHECK(m.denoiser->module().is_training());
  CHECK_FALSE(m.vae->is_training() != true);  // modules go back to the mode they had
  CHECK(torch::equal(rng, at::detail::getDefaultCPUGenerator().get_state()));
  for (const auto& [k, v] : lora->PeftTensors()) {
    INFO(k);
    CHECK(torch::equal(v, before.at(k)));
  }
  for (const torch::Tensor& p : lora->Parameters()) {
    CHECK(p.requires_grad());
    CHECK_FALSE(p.grad().defined());
  }
  // The LoRA is what the pipeline renders with.
  {
    torch::NoGradGuard no_grad;
    for (torch::Tensor& p : lora->Parameters()) p.zero_();
  }
  CHECK_FALSE(torch::equal(with_lora, Render(m, Request("a b"))));

  int calls = 0;
  Result<torch::Tensor> stopped =
      sampling::RenderImage(m, Request("a b"), [&] { return ++calls == 3; });
  REQUIRE(stopped.ok());
  CHECK_FALSE(stopped->defined());
  CHECK(calls == 3);
  CHECK(m.denoiser->module().is_training());
}

TEST_CASE("text to image: mismatched modules and sizes are refused with one line", "[sampling]") {
  TextToImageModel m = TinyModel(false);
  ImageRequest r = Request("a b");
  r.height = 31;
  Result<torch::Tensor> bad = sampling::RenderImage(m, r);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message() ==
        "text to image: height and width must be positive multiples of 2");
  r = Request("a b");
  r.steps = 0;
  CHECK_FALSE(sampling::RenderImage(m, r).ok());
  TextToImageModel two = m;
  two.encoders.push_back(m.encoders[0]);
  CHECK(sampling::CheckTextToImageModel(two).message() ==
        "text to image: this denoiser needs 1 text encoder(s), got 2");
  TextToImageModel narrow = m;
  narrow.encoders = {TinyEncoder(16, false, 1)};
  CHECK(sampling::CheckTextToImageModel(narrow).message() ==
        "text to image: the text encoders give 16 features, the denoiser's context width is 32");
}

}  // namespace gleaner::train::testing
