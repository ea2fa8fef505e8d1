// `gleaner-train sample` on the tiny generated diffusers models: PNGs the project's decoder reads,
// the same bytes for the same inputs, a LoRA file (UNet and text-encoder adapters) applied, and
// one line with exit 64 for bad usage, 2 for a bad model or LoRA.
#include <fstream>

#include "agent/protocol/trainer_protocol.h"
#include "agent/train/images/decode.h"
#include "agent/train/models/loader/diffusers_model.h"
#include "agent/train/models/loader/tiny_diffusers_model.h"
#include "agent/train/models/text/text_encoder_lora.h"
#include "agent/train/models/unet/unet_lora.h"
#include "train_test_util.h"

namespace gleaner::train::testing {
namespace {

std::string TinyModelDir(const TempDir& tmp, bool sdxl) {
  std::string dir = tmp / (sdxl ? "sdxl" : "sd");
  REQUIRE(models::WriteTinyDiffusersModel(dir, sdxl, 7).ok());
  return dir;
}

// A kohya-named LoRA for the model in `dir`: UNet and text-encoder adapters with random A and B.
void WriteLora(const std::string& dir, const std::string& out) {
  Result<models::DiffusersModel> m = models::LoadDiffusersModel(dir);
  REQUIRE(m.ok());
  UNet unet(*m->unet(), BasePlacement{});
  REQUIRE(LoadStateDict(unet, m->denoiser_weights).ok());
  torch::Generator gen = at::detail::createCPUGenerator(5);
  Result<DenoiserLora> lora = DenoiserLora::Attach(unet, 2, 2, gen);
  REQUIRE(lora.ok());
  torch::NoGradGuard no_grad;
  for (torch::Tensor& p : lora->Parameters()) p.normal_(0, 0.2, gen);
  TensorMap file = lora->KohyaTensors();
  for (size_t i = 0; i < m->text.size(); ++i) {
    text::TextEncoderRole role = !m->sdxl() ? text::TextEncoderRole::kSd
                                 : i == 0   ? text::TextEncoderRole::kSdxl1
                                            : text::TextEncoderRole::kSdxl2;
    LoraAdapters te = text::TextEncoderLora(*m->text[i].model, role);
    REQUIRE(te.Attach(2, 2, gen).ok());
    for (torch::Tensor& p : te.Parameters()) p.normal_(0, 0.2, gen);
    for (auto& [k, v] : te.Tensors(LoraFormat::kKohya)) file[k] = v;
  }
  REQUIRE(SaveSafetensors(out, file).ok());
}

images::Image DecodePng(const std::string& path) {
  Result<images::Image> img = images::DecodeImage(Bytes(path));
  REQUIRE(img.ok());
  return *img;
}

std::string FirstLine(const std::string& path) {
  std::string s = Bytes(path);
  return s.substr(0, s.find('\n'));
}

}  // namespace

TEST_CASE("gleaner-train sample renders the same PNG bytes every time and applies a LoRA",
          "[sampling][cli]") {
  TempDir tmp;
  for (bool sdxl : {false, true}) {
    INFO("sdxl " << sdxl);
    const std::string dir = TinyModelDir(tmp, sdxl);
    const std::string a = tmp / "a.png", b = tmp / "b.png", err = tmp / "err.txt";
    std::vector<std::string> args = {"sample",  "--model", dir,     "--prompt", "a red fox",
                                     "--steps", "3",       "--out", a};
    REQUIRE(RunBin(args, err) == 0);
    images::Image img = DecodePng(a);
    CHECK(img.width == 16);  // sample_size 8 x the VAE's factor 2
    CHECK(img.height == 16);
    args.back() = b;
    REQUIRE(RunBin(args, err) == 0);
    CHECK(Bytes(a) == Bytes(b));

    // Size, seed, sampler, guidance and negative prompt are taken.
    const std::string c = tmp / "c.png";
    REQUIRE(RunBin({"sample", "--model", dir, "--prompt", "a red fox", "--steps", "3",
                    "--resolution", "24", "--seed", "9", "--scheduler", "ddim", "--guidance", "3",
                    "--negative-prompt", "blurry", "--out", c},
                   err) == 0);
    CHECK(DecodePng(c).width == 24);

    // A kohya LoRA with UNet and text-encoder adapters changes the image.
    const std::string lora = tmp / "lora.safetensors", d = tmp / "d.png";
    WriteLora(dir, lora);
    REQUIRE(RunBin({"sample", "--model", dir, "--lora", lora, "--prompt", "a red fox", "--steps",
                    "3", "--out", d},
                   err) == 0);
    CHECK(Bytes(d) != Bytes(a));
    CHECK(DecodePng(d).width == 16);
  }
}

TEST_CASE("gleaner-train sample: exit 64 for bad usage and 2 for a bad model or LoRA",
          "[sampling][cli]") {
  TempDir tmp;
  const std::string dir = TinyModelDir(tmp, false), out = tmp / "x.png", err = tmp / "err.txt";
  auto expect = [&](std::vector<std::string> args, int code, const std::string& line) {
    args.insert(args.begin(), "sample");
    INFO(args.size());
    CHECK(RunBin(args, err) == code);
    CHECK(FirstLine(err) == line);
  };
  const std::vector<std::string> ok = {"--model", dir, "--prompt", "p", "--out", out};
  expect({"--model", dir, "--out", out}, kExitUsage, "gleaner-train sample: missing --prompt");
  auto with = [&](const std::string& flag, const std::string& value) {
    std::vector<std::string> a = ok;
    a.push_back(flag);
    a.push_back(value);
    return a;
  };
  expect(with("--steps", "x"), kExitUsage,
         "gleaner-train sample: --steps must be an integer in [1, 1000]");
  expect(with("--steps", "0"), kExitUsage,
         "gleaner-train sample: --steps must be an integer in [1, 1000]");
  expect(with("--guidance", "-1"), kExitUsage,
         "gleaner-train sample: --guidance must be a number in [0, 100]");
  expect(with("--scheduler", "pndm"), kExitUsage,
         "gleaner-train sample: --scheduler must be euler or ddim");
  expect(with("--bogus", "1"), kExitUsage, "gleaner-train sample: unknown argument --bogus");
  expect(with("--resolution", "31"), kExitFailed,
         "gleaner-train sample: bad_request: text to image: height and width must be "
         "positive multiples of 2");

  // A folder that is not a model, and a LoRA that does not fit.
  CHECK(RunBin({"sample", "--model", tmp / "nothing", "--prompt", "p", "--out", out}, err) ==
        kExitFailed);
  CHECK(FirstLine(err).find("gleaner-train sample: ") == 0);
  CHECK(FirstLine(err).find(tmp / "nothing") != std::string::npos);
  const std::string lora = tmp / "odd.safetensors";
  REQUIRE(
      SaveSafetensors(lora, {{"lora_unet_nowhere.lora_down.weight", torch::zeros({2, 4})}}).ok());
  CHECK(RunBin({"sample", "--model", dir, "--lora", lora, "--prompt", "p", "--out", out}, err) ==
        kExitFailed);
  CHECK(FirstLine(err).find(lora) != std::string::npos);
  CHECK(RunBin({"sample", "--model", dir, "--lora", tmp / "none.safetensors", "--prompt", "p",
                "--out", out},
               err) == kExitFailed);
  struct stat st;
  CHECK(::stat(out.c_str(), &st) != 0);  // nothing written on failure
}

}  // namespace gleaner::train::testing
