// `gleaner-train sample`: one image from a diffusers model folder and, optionally, a LoRA file
// (ours, PEFT/diffusers or kohya; UNet and text-encoder adapters), as a PNG.
//
//   gleaner-train sample --model DIR [--lora FILE] --prompt P [--negative-prompt N]
//                        [--steps 25] [--guidance 7.5] [--seed 0] [--resolution R]
//                        [--scheduler euler|ddim] --out x.png
//
// R defaults to the UNet's sample_size times the VAE's factor (diffusers' default size); the
// sampler to the folder's own (diffusers_pipeline.h). Exit 0 with the image written; 64 for bad
// usage (unknown or missing flags, numbers out of range); 2 when the model, LoRA or rendering
// fails (one line on stderr).
#include <cstdio>
#include <cstdlib>
#include <string>

#include "agent/protocol/trainer_protocol.h"
#include "agent/train/commands/commands.h"
#include "agent/train/common/command_flags.h"
#include "agent/train/models/loader/denoisers.h"
#include "agent/train/models/vae/image_latents.h"
#include "agent/train/sampling/diffusers_pipeline.h"
#include "agent/train/sampling/pipeline_lora.h"
#include "shared/native/files.h"

namespace gleaner::train {
namespace {

using namespace sampling;

constexpr const char* kUsage =
    "usage: gleaner-train sample --model DIR [--lora FILE] --prompt P [--negative-prompt N] "
    "[--steps 25] [--guidance 7.5] [--seed 0] [--resolution R] [--scheduler euler|ddim] "
    "--out x.png";

// A flag's integer value in [lo, hi], or `fallback` when absent.
Result<int64_t> IntFlag(const CommandFlags& f, const char* name, int64_t lo, int64_t hi,
                        int64_t fallback) {
  std::string v = FlagOr(f, name);
  if (v.empty()) return fallback;
  char* end = nullptr;
  long long x = std::strtoll(v.c_str(), &end, 10);
  if (*end != '\0' || x < lo || x > hi) {
    return Status::Invalid(std::string(name) + " must be an integer in [" + std::to_string(lo) +
                           ", " + std::to_string(hi) + "]");
  }
  return int64_t(x);
}

struct SampleArgs {
  std::string model, lora, out, scheduler;
  ImageRequest request;
  bool default_resolution = true;
};

Result<SampleArgs> ParseArgs(const CommandFlags& f) {
  SampleArgs a;
  a.model = f.at("--model");
  a.lora = FlagOr(f, "--lora");
  a.out = f.at("--out");
  a.scheduler = FlagOr(f, "--scheduler");
  if (!a.scheduler.empty() && a.scheduler != "euler" && a.scheduler != "ddim") {
    return Status::Invalid("--scheduler must be euler or ddim");
  }
  a.request.prompt = f.at("--prompt");
  a.request.negative_prompt = FlagOr(f, "--negative-prompt");
  Result<int64_t> steps = IntFlag(f, "--steps", 1, 1000, 25);
  Result<int64_t> seed = IntFlag(f, "--seed", 0, (int64_t(1) << 53) - 1, 0);
  Result<int64_t> res = IntFlag(f, "--resolution", 8, 4096, 0);
  for (auto* r : {&steps, &seed, &res}) {
    if (!r->ok()) return r->status();
  }
  a.request.steps = *steps;
  a.request.seed = uint64_t(*seed);
  a.default_resolution = *res == 0;
  a.request.height = a.request.width = *res;
  std::string g = FlagOr(f, "--guidance");
  if (!g.empty()) {
    char* end = nullptr;
    a.request.guidance_scale = std::strtod(g.c_str(), &end);
    if (*end != '\0' || !(a.request.guidance_scale >= 0 && a.request.guidance_scale <= 100)) {
      return Status::Invalid("--guidance must be a number in [0, 100]");
    }
  }
  return a;
}

Status RunSample(SampleArgs a) {
  Result<models::DiffusersModel> model = models::LoadDiffusersModel(a.model);
  if (!model.ok()) return model.status();
  return CatchTorch("sample", [&]() -> Status {
    Result<std::shared_ptr<Denoiser>> denoiser =
        models::BuildDenoiser(model->denoiser_config, model->denoiser_weights, BasePlacement{});
    if (!denoiser.ok()) return denoiser.status();
    Result<TextToImageModel> pipeline = TextToImageFrom(*model, *denoiser, a.scheduler);
    if (!pipeline.ok()) return pipeline.status();
    if (!a.lora.empty()) GLEANER_RETURN_IF_ERROR(AttachLoraFile(a.lora, *pipeline));
    if (a.default_resolution) {
      const DenoiserShape shape = model->denoiser_shape();
      a.request.height = shape.sample_height * model->vae_config.spatial_factor();
      a.request.width = shape.sample_width * model->vae_config.spatial_factor();
    }
    Result<torch::Tensor> image = RenderImage(*pipeline, a.request);
    if (!image.ok()) return image.status();
    Result<std::vector<std::string>> png = vae::EncodePngs(*image);
    if (!png.ok()) return png.status();
    return files::WriteDurable(a.out, png->front());
  });
}

}  // namespace

int SampleMain(int argc, char** argv) {
  Result<CommandFlags> flags =
      ParseCommandFlags(argc, argv, {"--model", "--prompt", "--out"},
                        {"--lora", "--negative-prompt", "--steps", "--guidance", "--seed",
                         "--resolution", "--scheduler"});
  Result<SampleArgs> args = flags.ok() ? ParseArgs(*flags) : Result<SampleArgs>(flags.status());
  if (!args.ok()) {
    std::fprintf(stderr, "gleaner-train sample: %s\n%s\n", args.status().message().c_str(), kUsage);
    return kExitUsage;
  }
  Status s = RunSample(std::move(*args));
  if (!s.ok()) {
    std::fprintf(stderr, "gleaner-train sample: %s\n", s.ToString().c_str());
    return kExitFailed;
  }
  return 0;
}

}  // namespace gleaner::train
