#include "agent/train/training/image_dataset.h"

#include <cstdio>
#include <functional>
#include <map>

#include "agent/train/images/archive.h"
#include "agent/train/images/dataset.h"
#include "agent/train/images/transform.h"
#include "agent/train/models/vae/image_latents.h"
#include "shared/native/files.h"
#include "shared/sha256.h"

namespace gleaner::train::training {
namespace {

constexpr const char* kCacheFormat = "gleaner-encoded-images";
constexpr const char* kCacheVersion = "1";

Result<images::Dataset> OpenImages(const std::string& path, const ImageEncoding& o) {
  images::DatasetOptions options;
  options.instance_prompt = o.instance_prompt;
  options.class_prompt = o.class_prompt;
  options.name = "dataset";
  return images::Dataset::Open(path, options);
}

// The ids of `caption` for one encoder: [1, max_position_embeddings] int64.
Result<torch::Tensor> CaptionTensor(const models::TextEncoderPart& part, const std::string& caption,
                                    const std::string& image) {
  Result<std::vector<int32_t>> ids =
      part.tokenizer.Encode(caption, size_t(part.config.max_position_embeddings));
  if (!ids.ok())
    return Status::Invalid("dataset: caption of " + image + ": " + ids.status().message());
  std::vector<int64_t> wide(ids->begin(), ids->end());
  return torch::tensor(wide, torch::kInt64).view({1, int64_t(wide.size())});
}

// SD: last hidden state; SDXL: both penultimate states side by side, and encoder 2's text_embeds;
// FLUX: T5's last hidden state, and CLIP's pooler output.
struct TextEmbedding {
  torch::Tensor text, pooled;  // [1, T, D], [1, P] (SDXL, FLUX)
};

Result<TextEmbedding> EmbedCaption(models::DiffusersModel& m, const std::string& caption,
                                   const std::string& image, torch::Device device,
                                   int64_t max_sequence_length) {
  TextEmbedding e;
  if (m.flux()) {
    Result<torch::Tensor> ids = CaptionTensor(m.text[0], caption, image);
    if (!ids.ok()) return ids.status();
    e.pooled = m.text[0].model->forward(ids->to(device)).pooler_output.cpu();
    std::vector<int64_t> t5 = m.t5->tokenizer.Encode(caption, size_t(max_sequence_length));
    torch::Tensor t5_ids = torch::tensor(t5, torch::kInt64).view({1, int64_t(t5.size())});
    e.text = m.t5->model->forward(t5_ids.to(device)).to(torch::kFloat32).cpu();
    return e;
  }
  std::vector<torch::Tensor> states;
  for (models::TextEncoderPart& part : m.text) {
    Result<torch::Tensor> ids = CaptionTensor(part, caption, image);
    if (!ids.ok()) return ids.status();
    text::ClipTextOutput out = part.model->forward(ids->to(device));
    if (!m.sdxl()) {
      e.text = out.last_hidden_state.cpu();
      return e;
    }
    states.push_back(out.penultimate_hidden_state.cpu());
    if (out.text_embeds.defined()) e.pooled = out.text_embeds.cpu();
  }
  e.text = torch::cat(states, -1);
  return e;
}

torch::Tensor TimeIds(const images::PreparedImage& p) {
  std::vector<float> v(p.time_ids.begin(), p.time_ids.end());
  return torch::tensor(v, torch::kFloat32).view({1, 6});
}

// One image of a list to encode: where messages say it is, its caption, and its pixels.
struct ListedImage {
  std::string path;
  std::string caption;
  std::function<Result<images::Image>()> decode;
};

// The instance images, or the class images (the dataset's, then the generated ones), in order.
std::vector<ListedImage> ListImages(const images::Dataset& d, const ImageEncoding& o,
                                    bool is_class) {
  std::vector<ListedImage> list;
  for (const images::DatasetImage& image : is_class ? d.class_images() : d.instance_images()) {
    list.push_back({image.path, image.caption, [&d, image] { return d.Decode(image); }});
  }
  if (!is_class) return list;
  for (const std::string& path : o.generated_class_images) {
    list.push_back({path, o.class_prompt, [path]() -> Result<images::Image> {
                      Result<std::string> bytes = files::ReadAll(path);
                      if (!bytes.ok()) return bytes.status();
                      Result<images::Image> image = images::DecodeImage(*bytes);
                      if (!image.ok())
                        return Status::Invalid(path + ": " + image.status().message());
                      return image;
                    }});
  }
  return list;
}

// Encodes one list (instance or class images) into `out` under `prefix`.
Status EncodeList(models::DiffusersModel& m, const std::vector<ListedImage>& list, bool is_class,
                  const ImageEncoding& o, torch::Generator& gen, torch::Device device,
                  TensorMap* out) {
  images::TransformOptions t;
  t.height = o.height;
  t.width = o.width;
  t.seed = o.seed;
  std::vector<torch::Tensor> latents, text, pooled, time_ids;
  std::map<std::string, TextEmbedding> by_caption;  // captions repeat (the prompt)
  for (size_t i = 0; i < list.size(); ++i) {
    Result<images::Image> image = list[i].decode();
    if (!image.ok()) return image.status();
    images::PreparedImage p = images::PrepareImage(*image, t, images::ImageKey(i, is_class));
    torch::Tensor x =
        torch::from_blob(p.pixels.data(), {1, 3, o.height, o.width}, torch::kFloat32).to(device);
    Result<torch::Tensor> z = vae::EncodeToLatents(*m.vae, x, gen);
    if (!z.ok()) return Status::Invalid("dataset: " + list[i].path + ": " + z.status().message());
    latents.push_back(z->cpu());
    auto it = by_caption.find(list[i].caption);
    if (it == by_caption.end()) {
      Result<TextEmbedding> e =
          EmbedCaption(m, list[i].caption, list[i].path, device, o.max_sequence_length);
      if (!e.ok()) return e.status();
      it = by_caption.emplace(list[i].caption, std::move(*e)).first;
    }
    text.push_back(it->second.text);
    if (it->second.pooled.defined()) pooled.push_back(it->second.pooled);
    if (m.sdxl()) time_ids.push_back(TimeIds(p));
  }
  const std::string prefix = is_class ? "class_" : "";
  (*out)[prefix + "latents"] = torch::cat(latents, 0).contiguous();
  (*out)[prefix + "text_embeddings"] = torch::cat(text, 0).contiguous();
  if (!pooled.empty())
    (*out)[prefix + "pooled_text_embeddings"] = torch::cat(pooled, 0).contiguous();
  if (!time_ids.empty()) (*out)[prefix + "time_ids"] = torch::cat(time_ids, 0).contiguous();
  return Status::Ok();
}

Result<std::string> CacheKey(const std::string& dataset_path, const ImageEncoding& o,
                             const models::DiffusersModel& m) {
  Result<files::FileDigest> digest = files::Digest(dataset_path);
  if (!digest.ok()) return digest.status();
  Json j = {{"dataset", digest->sha256},
            {"height", o.height},
            {"width", o.width},
            {"seed", o.seed},
            {"instance_prompt", o.instance_prompt},
            {"class_prompt", o.class_prompt},
            {"scaling_factor", m.vae_config.scaling_factor},
            {"sdxl", m.sdxl()}};
  if (m.flux()) {  // absent for the other families: their keys stay as they were
    j["family"] = "flux";
    j["shift_factor"] = m.vae_config.shift_factor.value_or(0.0);
    j["max_sequence_length"] = o.max_sequence_length;
  }
  if (!o.generated_class_images.empty()) {
    Json generated = Json::array();
    for (const std::string& path : o.generated_class_images) {
      Result<files::FileDigest> g = files::Digest(path);
      if (!g.ok()) return g.status();
      generated.push_back(g->sha256);
    }
    j["generated_class_images"] = std::move(generated);
  }
  return Sha256Hex(j.dump());
}

// The cached encoding when `path` holds one for `key`.
Result<Dataset> ReadCache(const std::string& path, const std::string& key,
                          const DenoiserShape& shape) {
  if (!files::Exists(path)) return Status::NotFound(path);
  std::map<std::string, std::string> meta;
  Result<TensorMap> f = LoadSafetensors(path, &meta);
  if (!f.ok()) return f.status();
  if (meta["format"] != kCacheFormat || meta["version"] != kCacheVersion || meta["key"] != key) {
    return Status::Invalid(path + ": an encoding of other inputs");
  }
  return LoadDataset(path, shape);
}

}  // namespace

ImageEncoding ImageEncodingFor(const models::DiffusersModel& model, const LoraSdParams& params) {
  ImageEncoding e;
  const DenoiserShape s = model.denoiser_shape();
  const int f = model.vae_config.spatial_factor();
  e.height = params.resolution > 0 ? int(params.resolution) : int(s.sample_height * f);
  e.width = params.resolution > 0 ? int(params.resolution) : int(s.sample_width * f);
  e.seed = uint64_t(params.seed);
  e.instance_prompt = params.instance_prompt;
  e.class_prompt = params.class_prompt;
  e.max_sequence_length = params.max_sequence_length;
  return e;
}

Result<int64_t> CountClassImages(const std::string& dataset_path, const ImageEncoding& o) {
  Result<images::Dataset> d = OpenImages(dataset_path, o);
  if (!d.ok()) return d.status();
  return int64_t(d->class_images().size());
}

bool IsImageArchive(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return false;
  std::string head(512, '\0');
  head.resize(std::fread(head.data(), 1, head.size(), f));
  std::fclose(f);
  return images::LooksLikeArchive(head);
}

Result<Dataset> EncodeImageDataset(models::DiffusersModel& m, const std::string& dataset_path,
                                   const ImageEncoding& o, const std::string& cache_path) {
  Result<std::string> key = CacheKey(dataset_path, o, m);
  if (!key.ok()) return key.status();
  Result<Dataset> cached = ReadCache(cache_path, *key, m.denoiser_shape());
  if (cached.ok()) {
    std::fprintf(stderr, "lora-sd: reusing the encoded dataset %s\n", cache_path.c_str());
    return cached;
  }
  if (cached.status().code() != Code::kNotFound) {
    std::fprintf(stderr, "lora-sd: encoding the dataset again (%s)\n",
                 cached.status().message().c_str());
    // Whatever is there (even a directory) goes, so the new encoding can take its place.
    GLEANER_RETURN_IF_ERROR(files::RemoveTree(cache_path));
  }
  Result<images::Dataset> d = OpenImages(dataset_path, o);
  if (!d.ok()) return d.status();
  if (m.vae == nullptr || m.text[0].model == nullptr) {
    return Status::Internal("EncodeImageDataset: the model was loaded without VAE or encoders");
  }
  TensorMap out;
  Status s = CatchTorch("encoding the dataset", [&]() -> Status {
    torch::NoGradGuard no_grad;
    torch::Device device =
        torch::cuda::is_available() ? torch::Device(torch::kCUDA, 0) : torch::Device(torch::kCPU);
    m.vae->to(device);
    for (models::TextEncoderPart& part : m.text) part.model->to(device);
    if (m.t5) m.t5->model->to(device);
    torch::Generator gen = at::detail::createCPUGenerator(o.seed);
    GLEANER_RETURN_IF_ERROR(EncodeList(m, ListImages(*d, o, false), false, o, gen, device, &out));
    const std::vector<ListedImage> class_images = ListImages(*d, o, true);
    if (!class_images.empty()) {
      GLEANER_RETURN_IF_ERROR(EncodeList(m, class_images, true, o, gen, device, &out));
    }
    m.vae->to(torch::kCPU);
    for (models::TextEncoderPart& part : m.text) part.model->to(torch::kCPU);
    if (m.t5) m.t5->model->to(torch::kCPU);
    return Status::Ok();
  });
  if (!s.ok()) return s;
  GLEANER_RETURN_IF_ERROR(MakeDirs(files::Dirname(cache_path)));
  GLEANER_RETURN_IF_ERROR(SaveSafetensors(
      cache_path, out, {{"format", kCacheFormat}, {"version", kCacheVersion}, {"key", *key}}));
  return LoadDataset(cache_path, m.denoiser_shape());
}

Result<CaptionIds> TokenizeCaptions(const models::DiffusersModel& m,
                                    const std::string& dataset_path, const ImageEncoding& o) {
  Result<images::Dataset> d = OpenImages(dataset_path, o);
  if (!d.ok()) return d.status();
  CaptionIds ids;
  Status s = CatchTorch("tokenizing captions", [&]() -> Status {
    for (bool is_class : {false, true}) {
      const std::vector<ListedImage> list = ListImages(*d, o, is_class);
      std::vector<torch::Tensor>& dst = is_class ? ids.prior : ids.instance;
      if (list.empty()) continue;
      for (const models::TextEncoderPart& part : m.text) {
        std::vector<torch::Tensor> rows;
        for (const ListedImage& image : list) {
          Result<torch::Tensor> t = CaptionTensor(part, image.caption, image.path);
          if (!t.ok()) return t.status();
          rows.push_back(*t);
        }
        dst.push_back(torch::cat(rows, 0));
      }
    }
    return Status::Ok();
  });
  if (!s.ok()) return s;
  return ids;
}

}  // namespace gleaner::train::training
