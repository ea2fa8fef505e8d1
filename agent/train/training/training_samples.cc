#include "agent/train/training/training_samples.h"

#include <chrono>

#include "agent/protocol/progress.h"
#include "agent/train/models/vae/image_latents.h"
#include "agent/train/sampling/diffusers_pipeline.h"

namespace gleaner::train::training {

using namespace sampling;

ImageRequest SampleRequest(const SampleSet& set, int i) {
  ImageRequest r;
  r.prompt = set.prompts[size_t(i)].prompt;
  r.negative_prompt = set.prompts[size_t(i)].negative_prompt;
  r.steps = set.sample_steps;
  r.guidance_scale = set.guidance_scale;
  r.seed = uint64_t(set.seed) + uint64_t(i);
  r.height = r.width = set.resolution;
  return r;
}

Result<std::optional<JobSamples>> JobSamplesFor(const Json& sample_params,
                                                const models::DiffusersModel* model,
                                                std::shared_ptr<Denoiser> denoiser) {
  Result<SampleSet> set = SampleSetFromParams(sample_params);
  if (!set.ok() && set.status().code() == Code::kNotFound) return std::optional<JobSamples>();
  if (!set.ok()) return set.status();
  if (model == nullptr) {
    return Status::Invalid(
        "sample_prompts need a diffusers model folder (model.format \"diffusers\"): a UNet "
        "weights file has no text encoders or VAE to render samples with");
  }
  Result<TextToImageModel> pipeline = TextToImageFrom(*model, std::move(denoiser));
  if (!pipeline.ok()) return pipeline.status();
  JobSamples j;
  j.set = *set;
  j.every = sample_params.value("sample_every", int64_t(0));
  j.model = std::move(*pipeline);
  return std::optional<JobSamples>(std::move(j));
}

Status WriteTrainingSamples(const TextToImageModel& model, SampleSet set, int64_t step,
                            const std::string& work_dir, const std::string& kind,
                            const std::string& job_id, const std::function<bool()>& stop,
                            bool* stopped) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  *stopped = false;
  set.step = step;
  std::vector<std::string> pngs;
  for (int i = 0; i < int(set.prompts.size()); ++i) {
    Result<torch::Tensor> image = RenderImage(model, SampleRequest(set, i), stop);
    if (!image.ok()) return image.status();
    if (!image->defined()) {
      *stopped = true;
      return Status::Ok();
    }
    Result<std::vector<std::string>> png = vae::EncodePngs(*image);
    if (!png.ok()) return png.status();
    pngs.push_back(std::move(png->front()));
  }
  if (stop && stop()) {
    *stopped = true;
    return Status::Ok();
  }
  set.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::string dir = SampleDirFor(work_dir, step);
  GLEANER_RETURN_IF_ERROR(WriteSampleSet(dir, kind, job_id, set, pngs));
  EmitSamples(step, dir, set.seconds);
  return Status::Ok();
}

}  // namespace gleaner::train::training
