#include "agent/train/lora_sd/job_inputs.h"

#include <algorithm>

#include "agent/protocol/trainer_protocol.h"

namespace gleaner::train::lora_sd {
namespace {

Result<std::string> InputPath(const Json& spec, const char* name) {
  auto in = spec.find("inputs");
  if (in == spec.end() || !in->is_object()) return Status::Invalid("spec.inputs is required");
  auto it = in->find(name);
  if (it == in->end() || !it->is_string() || it->get<std::string>().empty()) {
    return Status::Invalid(std::string("spec.inputs.") + name + " must be a local path");
  }
  return it->get<std::string>();
}

Result<UNetConfig> SpecConfig(const Json& spec) {
  auto model = spec.find("model");
  if (model != spec.end() && model->is_object() && model->contains("config")) {
    return ParseUNetConfig((*model)["config"]);
  }
  Result<std::string> path = InputPath(spec, "config");
  if (!path.ok()) return Status::Invalid("spec.model.config (the UNet config) is required");
  Result<std::string> text = ReadFile(*path);
  if (!text.ok()) return text.status();
  Result<Json> j = ParseJson(*text);
  if (!j.ok()) return Status::Invalid(*path + ": " + j.status().message());
  return ParseUNetConfig(*j);
}

bool IsDiffusers(const Json& spec) {
  auto model = spec.find("model");
  return model != spec.end() && model->is_object() &&
         model->value("format", "") == kModelFormatDiffusers;
}

// A UNet weights file with its config, and a latent dataset: the format jobs had first.
Result<JobInputs> LoadWeightsFileJob(const Json& spec, const std::string& model_path,
                                     const std::string& data_path) {
  JobInputs in;
  Result<UNetConfig> cfg = SpecConfig(spec);
  if (!cfg.ok()) return cfg.status();
  in.config = std::move(*cfg);
  // The dataset first: it is small, and a mismatch with the config fails before the weights load.
  Result<Dataset> data = LoadDataset(data_path, in.config);
  if (!data.ok()) return data.status();
  in.data = std::move(*data);
  Result<TensorMap> weights = LoadWeights(model_path);
  if (!weights.ok()) return weights.status();
  in.unet_weights = std::move(*weights);
  return in;
}

// Diffusers' rule: the class images the dataset lacks (none when it has enough).
Result<ClassImages> GenerateMissingClassImages(const models::DiffusersModel& model,
                                               const TensorMap& unet_weights, const LoraSdParams& p,
                                               const ImageEncoding& encoding,
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
  return GenerateClassImages(model, unet_weights, request, cache_dir, stop);
}

}  // namespace

std::string EncodedDatasetPath(const std::string& cache_dir) {
  return cache_dir + "/encoded-dataset.safetensors";
}

Result<JobInputs> LoadJobInputs(const Json& spec, const LoraSdParams& p,
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
    return LoadWeightsFileJob(spec, *model_path, *data_path);
  }
  if (!images && (p.train_text_encoder || p.num_class_images > 0)) {
    return Status::Invalid(
        std::string(p.train_text_encoder ? "train_text_encoder" : "num_class_images") +
        " needs an image dataset (photos and captions)");
  }
  models::DiffusersLoadOptions options;
  // What encoding the photos or rendering samples (sampling/training_samples.h) needs.
  options.vae = options.text_encoders = images || !p.samples.empty();
  Result<models::DiffusersModel> model = models::LoadDiffusersModel(*model_path, options);
  if (!model.ok()) return model.status();
  JobInputs in;
  in.config = model->unet_config;
  in.unet_weights = std::move(model->unet_weights);
  model->unet_weights.clear();
  if (!images) {
    Result<Dataset> data = LoadDataset(*data_path, in.config);
    if (!data.ok()) return data.status();
    in.data = std::move(*data);
  } else {
    ImageEncoding encoding = ImageEncodingFor(*model, p);
    if (p.num_class_images > 0) {
      Result<ClassImages> generated = GenerateMissingClassImages(
          *model, in.unet_weights, p, encoding, *data_path, cache_dir, stop);
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

}  // namespace gleaner::train::lora_sd
