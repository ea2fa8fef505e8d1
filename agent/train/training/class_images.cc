#include "agent/train/training/class_images.h"

#include <chrono>
#include <cstdio>

#include "agent/train/images/decode.h"
#include "agent/train/images/transform.h"
#include "agent/train/models/loader/denoisers.h"
#include "agent/train/models/vae/image_latents.h"
#include "agent/train/sampling/diffusers_pipeline.h"
#include "shared/native/files.h"
#include "shared/sha256.h"

namespace gleaner::train::training {
namespace {

// The purpose of the seed draw (images::DrawU64), apart from the crop and flip draws.
constexpr uint64_t kClassImageDraw = 0x636c617373;  // "class"

// The request of image i (see the header).
sampling::ImageRequest RequestFor(const ClassImageRequest& r, int64_t i) {
  sampling::ImageRequest q;  // steps and guidance_scale: its defaults
  q.prompt = r.prompt;
  q.seed = ClassImageSeed(r.seed, i);
  q.height = r.height;
  q.width = r.width;
  return q;
}

std::string ImagePath(const std::string& dir, int64_t i) {
  char name[32];
  std::snprintf(name, sizeof name, "%04lld.png", static_cast<long long>(i));
  return dir + "/" + name;
}

// True when `path` holds a complete PNG of the request's size (a rendered image).
bool Cached(const std::string& path, const ClassImageRequest& r) {
  if (!files::Exists(path)) return false;
  Result<std::string> bytes = files::ReadAll(path);
  if (!bytes.ok()) return false;
  Result<images::Image> image = images::DecodeImage(*bytes);
  return image.ok() && image->height == r.height && image->width == r.width;
}

torch::Device ComputeDevice() {
  return torch::cuda::is_available() ? torch::Device(torch::kCUDA, 0) : torch::Device(torch::kCPU);
}

}  // namespace

std::string ClassImagesDir(const std::string& cache_dir, const ClassImageRequest& r) {
  const sampling::ImageRequest q = RequestFor(r, 0);
  Json key = {{"prompt", r.prompt},        {"seed", r.seed},   {"height", r.height},
              {"width", r.width},          {"steps", q.steps}, {"guidance_scale", q.guidance_scale},
              {"mixed", r.mixed_precision}};
  return cache_dir + "/class-images-" + Sha256Hex(key.dump()).substr(0, 16);
}

uint64_t ClassImageSeed(uint64_t seed, int64_t i) {
  return images::DrawU64(seed, uint64_t(i), kClassImageDraw);
}

Result<ClassImages> GenerateClassImages(const models::DiffusersModel& model,
                                        const TensorMap& denoiser_weights,
                                        const ClassImageRequest& r, const std::string& cache_dir,
                                        const std::function<bool()>& stop) {
  using Clock = std::chrono::steady_clock;
  ClassImages out;
  const std::string dir = ClassImagesDir(cache_dir, r);
  std::vector<int64_t> missing;
  for (int64_t i = 0; i < r.count; ++i) {
    out.paths.push_back(ImagePath(dir, i));
    if (!Cached(out.paths.back(), r)) missing.push_back(i);
  }
  if (missing.empty()) return out;
  GLEANER_RETURN_IF_ERROR(files::MakeDirs(dir));
  const auto start = Clock::now();
  Status s = CatchTorch("generating class images", [&]() -> Status {
    torch::NoGradGuard no_grad;
    const torch::Device device = ComputeDevice();
    Result<std::shared_ptr<Denoiser>> base = models::BuildDenoiser(
        model.denoiser_config, denoiser_weights, PlacementFor(device, r.mixed_precision));
    if (!base.ok()) return base.status();
    Result<sampling::TextToImageModel> pipeline = sampling::TextToImageFrom(model, *base);
    if (!pipeline.ok()) return pipeline.status();
    model.vae->to(device);
    for (const models::TextEncoderPart& part : model.text) part.model->to(device);
    if (model.t5) model.t5->model->to(device);
    Status rendered = Status::Ok();
    for (int64_t i : missing) {
      Result<torch::Tensor> image = sampling::RenderImage(*pipeline, RequestFor(r, i), stop);
      if (!image.ok()) {
        rendered = image.status();
        break;
      }
      if (!image->defined()) {
        out.stopped = true;
        break;
      }
      Result<std::vector<std::string>> png = vae::EncodePngs(*image);
      if (!png.ok()) {
        rendered = png.status();
        break;
      }
      rendered = files::WriteDurable(out.paths[size_t(i)], png->front());
      if (!rendered.ok()) break;
      ++out.rendered;
      std::fprintf(stderr, "lora-sd: class image %lld of %lld rendered\n",
                   static_cast<long long>(i + 1), static_cast<long long>(r.count));
    }
    model.vae->to(torch::kCPU);
    for (const models::TextEncoderPart& part : model.text) part.model->to(torch::kCPU);
    if (model.t5) model.t5->model->to(torch::kCPU);
    return rendered;
  });
  if (!s.ok()) return Status(s.code(), "class images: " + s.message());
  out.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (out.stopped) out.paths.clear();
  return out;
}

}  // namespace gleaner::train::training
