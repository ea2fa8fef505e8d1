#include "agent/train/models/loader/diffusers_model.h"

#include "shared/native/files.h"

namespace gleaner::train::models {
namespace {

// Prefixes a component's message with the file at fault unless it already names it.
Status Named(const std::string& path, const Status& s) {
  if (s.ok() || s.message().rfind(path, 0) == 0) return s;
  return Status(s.code(), path + ": " + s.message());
}

Result<Json> ReadJsonObject(const std::string& path) {
  if (!files::Exists(path)) return Status::NotFound(path + ": missing");
  Result<std::string> text = ReadFile(path);
  if (!text.ok()) return Named(path, text.status());
  Result<Json> j = ParseJson(*text);
  if (!j.ok()) return Named(path, j.status());
  if (!j->is_object()) return Status::Invalid(path + ": expected a JSON object");
  return *j;
}

Status RequireDir(const std::string& dir) {
  if (!files::IsDir(dir)) return Status::NotFound(dir + ": missing (not a folder)");
  return Status::Ok();
}

Result<TensorMap> LoadUnetWeights(const std::string& dir, torch::ScalarType dtype) {
  Result<std::string> path = FindComponentWeights(dir, "diffusion_pytorch_model");
  if (!path.ok()) return path.status();
  Result<TensorMap> w = LoadWeights(*path);
  if (!w.ok()) return Named(*path, w.status());
  Status s = CatchTorch("converting the UNet weights", [&]() -> Status {
    for (auto& [name, t] : *w) {
      if (!t.is_floating_point()) {
        return Status::Invalid(*path + ": tensor " + name + " is not F32, F16 or BF16");
      }
      if (t.scalar_type() != dtype) t = t.to(dtype);
    }
    return Status::Ok();
  });
  if (!s.ok()) return s;
  return w;
}

Result<std::shared_ptr<vae::AutoencoderKL>> LoadVae(const std::string& dir,
                                                    const vae::VaeConfig& config) {
  Result<std::string> path = FindComponentWeights(dir, "diffusion_pytorch_model");
  if (!path.ok()) return path.status();
  Result<TensorMap> w = LoadWeights(*path);
  if (!w.ok()) return Named(*path, w.status());
  std::shared_ptr<vae::AutoencoderKL> model;
  GLEANER_RETURN_IF_ERROR(CatchTorch("building the VAE", [&]() -> Status {
    model = std::make_shared<vae::AutoencoderKL>(config);
    return Status::Ok();
  }));
  GLEANER_RETURN_IF_ERROR(Named(*path, vae::LoadVaeWeights(*model, *w)));
  model->eval();
  return model;
}

// tokenizer[_2]/ and text_encoder[_2]/config.json (the model is built later, BuildTextModel).
Result<TextEncoderPart> LoadTextPart(const std::string& root, const std::string& suffix) {
  TextEncoderPart part;
  part.name = "text_encoder" + suffix;
  const std::string enc = root + "/" + part.name, tok = root + "/tokenizer" + suffix;
  GLEANER_RETURN_IF_ERROR(RequireDir(enc));
  GLEANER_RETURN_IF_ERROR(RequireDir(tok));
  for (const char* f : {"vocab.json", "merges.txt"}) {
    if (!files::Exists(tok + "/" + f)) return Status::NotFound(tok + "/" + f + ": missing");
  }
  Result<text::ClipTokenizer> t = text::ClipTokenizer::Load(tok);
  if (!t.ok()) return Named(tok, t.status());
  part.tokenizer = *t;
  const std::string config_path = enc + "/config.json";
  if (!files::Exists(config_path)) return Status::NotFound(config_path + ": missing");
  Result<text::ClipTextConfig> c = text::LoadClipTextConfig(config_path);
  if (!c.ok()) return Named(config_path, c.status());
  part.config = *c;
  if (int64_t(part.tokenizer.vocab_size()) > part.config.vocab_size) {
    return Status::Invalid(tok + "/vocab.json: " + std::to_string(part.tokenizer.vocab_size()) +
                           " tokens, more than " + config_path + "'s vocab_size " +
                           std::to_string(part.config.vocab_size));
  }
  return part;
}

Status BuildTextModel(const std::string& root, TextEncoderPart* part) {
  const std::string enc = root + "/" + part->name;
  Result<std::string> w = FindComponentWeights(enc, "model");
  if (!w.ok()) return w.status();
  Result<std::shared_ptr<text::ClipTextModel>> m =
      text::LoadClipTextModel(enc + "/config.json", *w);
  if (!m.ok()) return Named(*w, m.status());
  part->model = *m;
  return Status::Ok();
}

std::string Int(int64_t v) {
  return std::to_string(v);
}

// The cross-component shape rules of the header.
Status CheckFits(const DiffusersModel& m) {
  const unet::UNetConfig& u = m.unet_config;
  const std::string unet = m.dir + "/unet/config.json";
  if (m.vae_config.latent_channels != u.in_channels) {
    return Status::Invalid(m.dir + "/vae/config.json: latent_channels " +
                           Int(m.vae_config.latent_channels) + " but " + unet +
                           " has in_channels " + Int(u.in_channels));
  }
  const text::ClipTextConfig& t1 = m.text[0].config;
  if (!m.sdxl()) {
    if (t1.hidden_size != u.cross_attention_dim) {
      return Status::Invalid(m.dir + "/text_encoder/config.json: hidden_size " +
                             Int(t1.hidden_size) + " but " + unet + " has cross_attention_dim " +
                             Int(u.cross_attention_dim));
    }
    return Status::Ok();
  }
  const text::ClipTextConfig& t2 = m.text[1].config;
  const std::string c2 = m.dir + "/text_encoder_2/config.json";
  if (t1.hidden_size + t2.hidden_size != u.cross_attention_dim) {
    return Status::Invalid(c2 + ": hidden sizes " + Int(t1.hidden_size) + " + " +
                           Int(t2.hidden_size) + " do not add up to " + unet +
                           "'s cross_attention_dim " + Int(u.cross_attention_dim));
  }
  if (!t2.with_projection) {
    return Status::Invalid(c2 + ": SDXL needs CLIPTextModelWithProjection");
  }
  if (t2.projection_dim != u.pooled_dim()) {
    return Status::Invalid(c2 + ": projection_dim " + Int(t2.projection_dim) + " but " + unet +
                           " expects pooled text embeddings of " + Int(u.pooled_dim()));
  }
  return Status::Ok();
}

}  // namespace

Result<std::string> FindComponentWeights(const std::string& component_dir,
                                         const std::string& stem) {
  for (const char* suffix : {".safetensors", ".safetensors.index.json", ".fp16.safetensors",
                             ".fp16.safetensors.index.json"}) {
    std::string p = component_dir + "/" + stem + suffix;
    if (files::Exists(p) && !files::IsDir(p)) return p;
  }
  return Status::NotFound(component_dir + ": no " + stem + ".safetensors (nor " + stem +
                          ".safetensors.index.json, nor an .fp16 variant)");
}

Result<DiffusersModel> LoadDiffusersModel(const std::string& dir,
                                          const DiffusersLoadOptions& options) {
  if (options.unet_dtype != torch::kFloat32 && options.unet_dtype != torch::kFloat16 &&
      options.unet_dtype != torch::kBFloat16) {
    return Status::Invalid("diffusers model: unet_dtype must be F32, F16 or BF16");
  }
  DiffusersModel m;
  m.dir = dir;
  GLEANER_RETURN_IF_ERROR(RequireDir(dir));
  Result<Json> index = ReadJsonObject(dir + "/model_index.json");
  if (!index.ok()) return index.status();
  m.model_index = std::move(*index);

  const std::string unet_dir = dir + "/unet";
  GLEANER_RETURN_IF_ERROR(RequireDir(unet_dir));
  Result<Json> unet_json = ReadJsonObject(unet_dir + "/config.json");
  if (!unet_json.ok()) return unet_json.status();
  Result<unet::UNetConfig> unet = unet::ParseUNetConfig(*unet_json);
  if (!unet.ok()) return Named(unet_dir + "/config.json", unet.status());
  m.unet_config = std::move(*unet);

  const std::string vae_dir = dir + "/vae";
  GLEANER_RETURN_IF_ERROR(RequireDir(vae_dir));
  if (!files::Exists(vae_dir + "/config.json")) {
    return Status::NotFound(vae_dir + "/config.json: missing");
  }
  Result<vae::VaeConfig> vae_config = vae::LoadVaeConfig(vae_dir + "/config.json");
  if (!vae_config.ok()) return Named(vae_dir + "/config.json", vae_config.status());
  m.vae_config = *vae_config;

  Result<TextEncoderPart> t1 = LoadTextPart(dir, "");
  if (!t1.ok()) return t1.status();
  m.text.push_back(std::move(*t1));
  if (m.sdxl()) {
    Result<TextEncoderPart> t2 = LoadTextPart(dir, "_2");
    if (!t2.ok()) return t2.status();
    m.text.push_back(std::move(*t2));
  }

  Result<Json> scheduler = ReadJsonObject(dir + "/scheduler/scheduler_config.json");
  if (!scheduler.ok()) return scheduler.status();
  m.scheduler_config = std::move(*scheduler);

  GLEANER_RETURN_IF_ERROR(CheckFits(m));
  if (options.before_large_files) GLEANER_RETURN_IF_ERROR(options.before_large_files(m));
  // The large files last, once everything small is known to fit.
  if (options.text_encoders) {
    for (TextEncoderPart& part : m.text) GLEANER_RETURN_IF_ERROR(BuildTextModel(dir, &part));
  }
  if (options.vae) {
    Result<std::shared_ptr<vae::AutoencoderKL>> v = LoadVae(vae_dir, m.vae_config);
    if (!v.ok()) return v.status();
    m.vae = *v;
  }
  if (options.unet) {
    Result<TensorMap> w = LoadUnetWeights(unet_dir, options.unet_dtype);
    if (!w.ok()) return w.status();
    m.unet_weights = std::move(*w);
  }
  return m;
}

}  // namespace gleaner::train::models
