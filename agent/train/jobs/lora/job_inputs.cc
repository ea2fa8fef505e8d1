#include "agent/train/jobs/lora/job_inputs.h"

#include <algorithm>
#include <cstdio>

#include "agent/protocol/memory_budget.h"
#include "agent/protocol/trainer_protocol.h"
#include "agent/train/nn/attention.h"
#include "agent/train/training/flux_memory_estimate.h"
#include "agent/train/training/memory_estimate.h"

namespace gleaner::train::lora {
namespace {

using namespace training;
using unet::ParseUNetConfig;
using unet::UNetConfig;

Result<std::string> InputPath(const TrainerSpec& spec, const char* name) {
  const TrainerInput* in = spec.Input(name);
  if (in == nullptr) return Status::Invalid(std::string("spec.inputs.") + name + " is required");
  return in->path;
}

// The UNet config of a single-file model: spec.model.config, else the file inputs.config.
Result<UNetConfig> SpecConfig(const TrainerSpec& spec) {
  if (!spec.model_config.is_null()) return ParseUNetConfig(spec.model_config);
  Result<std::string> path = InputPath(spec, "config");
  if (!path.ok()) return Status::Invalid("spec.model.config (the UNet config) is required");
  Result<std::string> text = ReadFile(*path);
  if (!text.ok()) return text.status();
  Result<Json> j = ParseJson(*text);
  if (!j.ok()) return Status::Invalid(*path + ": " + j.status().message());
  return ParseUNetConfig(*j);
}

// Where this trainer runs and whether its attention kernel skips the B·heads·L² scores (only
// CUDA's fused kernels do: attention.h).
bool OnCuda() {
  return torch::cuda::is_available();
}
bool FusedAttention() {
  return OnCuda() && std::string(AutoAttentionKernelName()) == "fused";
}

// The memory check (memory_estimate.h) of an estimate: it goes to stderr for the node's log; a
// job over the budget fails here, before anything large is read or built.
Status CheckEstimate(const MemoryEstimate& e, bool cuda, const LoraSdParams& p) {
  const MemoryBudget budget = ReadMemoryBudget();
  constexpr double kMiB = 1024.0 * 1024.0;
  std::fprintf(stderr,
               "lora-sd: memory estimate %.0f MiB%s (weights %.0f, lora %.0f, activations %.0f, "
               "encoders %.0f, sampling %.0f), host %.0f MiB; budget RAM %.0f MiB, VRAM %.0f "
               "MiB\n",
               e.device_peak / kMiB, cuda ? " on the GPU" : "", e.denoiser_weights / kMiB,
               e.lora / kMiB, e.activations / kMiB, e.encoders / kMiB, e.sampling / kMiB,
               e.host_peak / kMiB, double(budget.host_bytes) / kMiB,
               double(budget.device_bytes) / kMiB);
  return CheckMemory(e, cuda, p, budget.host_bytes, budget.device_bytes);
}

Status CheckJobMemory(MemoryJob job, const LoraSdParams& p) {
  job.cuda = OnCuda();
  job.fused_attention = FusedAttention();
  return CheckEstimate(EstimateMemory(job, p), job.cuda, p);
}

// FLUX (flux_memory_estimate.h): checked once the configs are read, at the training size (the
// photos are resized to it: image_dataset.h).
Status CheckFluxJobMemory(const models::DiffusersModel& m, const LoraSdParams& p, bool images) {
  FluxMemoryJob job;
  job.transformer = std::get<flux::FluxConfig>(m.denoiser_config);
  const DenoiserShape s = m.denoiser_shape();
  const int64_t f = m.vae_config.spatial_factor();
  const int64_t h = p.resolution > 0 ? p.resolution / f : s.sample_height;
  const int64_t w = p.resolution > 0 ? p.resolution / f : s.sample_width;
  job.image_tokens = (h / 2) * (w / 2);
  job.text_tokens = p.max_sequence_length;
  job.prior = p.num_class_images > 0;
  job.encoders = images || !p.samples.empty();
  if (m.t5) job.t5 = m.t5->config;
  if (!m.text.empty()) job.clip = m.text.front().config;
  job.vae = m.vae_config;
  job.cuda = OnCuda();
  job.fused_attention = FusedAttention();
  return CheckEstimate(EstimateFluxMemory(job, p), job.cuda, p);
}

// The check for a latent dataset, with its real latent and caption sizes.
Status CheckLatentJob(const UNetConfig& config, const Dataset& data, const LoraSdParams& p,
                      const models::DiffusersModel* model) {
  MemoryJob job;
  job.unet = config;
  if (data.instance.latents.defined() && data.instance.latents.dim() == 4) {
    job.latent_height = data.instance.latents.size(2);
    job.latent_width = data.instance.latents.size(3);
  }
  if (data.instance.text.defined() && data.instance.text.dim() == 3) {
    job.text_tokens = data.instance.text.size(1);
  }
  job.prior = data.has_prior();
  if (model != nullptr && !p.samples.empty()) {  // samples load the VAE and the text encoders
    job.has_vae = true;
    job.vae = model->vae_config;
    for (const models::TextEncoderPart& part : model->text) job.text.push_back(part.config);
  }
  return CheckJobMemory(job, p);
}

// The claim names the model's form (agent/protocol/trainer_spec.h); a spec written by hand
// without it means a single UNet weights file.
bool IsDiffusers(const TrainerSpec& spec) {
  return spec.ModelFormat() == kModelFormatDiffusers;
}

// A UNet weights file with its config, and a latent dataset: the format jobs had first.
Result<JobInputs> LoadWeightsFileJob(const TrainerSpec& spec, const LoraSdParams& p,
                                     const std::string& model_path, const std::string& data_path) {
  JobInputs in;
  Result<UNetConfig> cfg = SpecConfig(spec);
  if (!cfg.ok()) return cfg.status();
  in.config = *cfg;
  // The dataset first: it is small, and a mismatch with the config fails before the weights load.
  Result<Dataset> data = LoadDataset(data_path, unet::ShapeOf(*cfg));
  if (!data.ok()) return data.status();
  in.data = std::move(*data);
  GLEANER_RETURN_IF_ERROR(CheckLatentJob(*cfg, in.data, p, nullptr));
  Result<TensorMap> weights = LoadWeights(model_path);
  if (!weights.ok()) return weights.status();
  in.denoiser_weights = std::move(*weights);
  return in;
}

// Diffusers' rule: the class images the dataset lacks (none when it has enough).
Result<ClassImages> GenerateMissingClassImages(const models::DiffusersModel& model,
                                               const TensorMap& denoiser_weights,
                                               const LoraSdParams& p, const ImageEncoding& encoding,
                                               const std::string& data_path,
                                               const std::string& cache_dir,
                                               const std::function<bool()>& stop) {
  Result<int64_t> supplied = CountClassImages(data_path, encoding);
  if (!supplied.ok()) return supplied.status();
  ClassImageRequest request;
  request.prompt = p.class_prompt;
  request.seed = uint64_t(p.seed);
  request.height = encoding.height;
  request.width = encoding.width;
  request.count = std::max<int64_t>(0, p.num_class_images - *supplied);
  request.mixed_precision = p.mixed_precision;
  if (request.count == 0) return ClassImages();
  return GenerateClassImages(model, denoiser_weights, request, cache_dir, stop);
}

}  // namespace

std::string EncodedDatasetPath(const std::string& cache_dir) {
  return cache_dir + "/encoded-dataset.safetensors";
}

Result<JobInputs> LoadJobInputs(const TrainerSpec& spec, const LoraSdParams& p,
                                const std::string& cache_dir, const std::function<bool()>& stop) {
  Result<std::string> model_path = InputPath(spec, "model");
  if (!model_path.ok()) return model_path.status();
  Result<std::string> data_path = InputPath(spec, "dataset");
  if (!data_path.ok()) return data_path.status();
  const bool images = IsImageArchive(*data_path);
  if (!IsDiffusers(spec)) {
    if (images || p.train_text_encoder || p.num_class_images > 0) {
      const char* what = images                 ? "an image dataset"
                         : p.train_text_encoder ? "train_text_encoder"
                                                : "num_class_images";
      return Status::Invalid(std::string(what) +
                             " needs a base model in diffusers layout (model.format \"" +
                             kModelFormatDiffusers + "\")");
    }
    return LoadWeightsFileJob(spec, p, *model_path, *data_path);
  }
  if (!images && (p.train_text_encoder || p.num_class_images > 0)) {
    return Status::Invalid(
        std::string(p.train_text_encoder ? "train_text_encoder" : "num_class_images") +
        " needs an image dataset (photos and captions)");
  }
  models::DiffusersLoadOptions options;
  // What encoding the photos or rendering samples (training/training_samples.h) needs.
  options.vae = options.text_encoders = images || !p.samples.empty();
  // The memory check once the configs are read, before any weights or module (a latent dataset
  // is checked again below with its own sizes).
  options.before_large_files = [&](const models::DiffusersModel& m) -> Status {
    if (m.flux()) return CheckFluxJobMemory(m, p, images);
    MemoryJob job;
    job.unet = *m.unet();
    job.has_vae = options.vae;
    job.vae = m.vae_config;
    if (options.text_encoders) {
      for (const models::TextEncoderPart& part : m.text) job.text.push_back(part.config);
    }
    const int64_t f = m.vae_config.spatial_factor();
    job.latent_height = p.resolution > 0 ? p.resolution / f : m.unet()->sample_size.front();
    job.latent_width = p.resolution > 0 ? p.resolution / f : m.unet()->sample_size.back();
    if (!m.text.empty()) job.text_tokens = m.text.front().config.max_position_embeddings;
    job.prior = p.num_class_images > 0;
    job.encode_images = images;
    return CheckJobMemory(job, p);
  };
  Result<models::DiffusersModel> model = models::LoadDiffusersModel(*model_path, options);
  if (!model.ok()) return model.status();
  if (model->flux() && p.train_text_encoder) {
    return Status::Invalid("train_text_encoder is not supported for FLUX models yet");
  }
  JobInputs in;
  in.config = model->denoiser_config;
  in.denoiser_weights = std::move(model->denoiser_weights);
  model->denoiser_weights.clear();
  if (!images) {
    Result<Dataset> data = LoadDataset(*data_path, model->denoiser_shape());
    if (!data.ok()) return data.status();
    in.data = std::move(*data);
    if (const UNetConfig* unet = model->unet()) {
      GLEANER_RETURN_IF_ERROR(CheckLatentJob(*unet, in.data, p, &*model));
    }
  } else {
    ImageEncoding encoding = ImageEncodingFor(*model, p);
    if (p.num_class_images > 0) {
      Result<ClassImages> generated = GenerateMissingClassImages(
          *model, in.denoiser_weights, p, encoding, *data_path, cache_dir, stop);
      if (!generated.ok()) return generated.status();
      if (generated->stopped) {
        JobInputs stopped;
        stopped.class_images.stopped = true;
        return stopped;
      }
      encoding.generated_class_images = generated->paths;
      in.class_images = std::move(*generated);
    }
    Result<Dataset> data =
        EncodeImageDataset(*model, *data_path, encoding, EncodedDatasetPath(cache_dir));
    if (!data.ok()) return data.status();
    in.data = std::move(*data);
    if (p.train_text_encoder) {
      Result<CaptionIds> ids = TokenizeCaptions(*model, *data_path, encoding);
      if (!ids.ok()) return ids.status();
      for (const models::TextEncoderPart& part : model->text) {
        in.text.encoders.push_back(part.model);
      }
      in.text.instance_ids = std::move(ids->instance);
      in.text.prior_ids = std::move(ids->prior);
    }
  }
  in.model = std::move(*model);
  return in;
}

}  // namespace gleaner::train::lora
