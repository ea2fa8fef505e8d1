#include "agent/train/models/loader/diffusers_model.h"

#include "agent/train/models/flux/flux_single_file.h"
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

// unet/ or transformer/ weights, floating-point ones converted to `dtype`.
Result<TensorMap> LoadDenoiserWeights(const std::string& dir, torch::ScalarType dtype) {
  Result<std::string> path = FindComponentWeights(dir, "diffusion_pytorch_model");
  if (!path.ok()) return path.status();
  Result<TensorMap> w = LoadWeights(*path);
  if (!w.ok()) return Named(*path, w.status());
  Status s = CatchTorch("converting the denoiser weights", [&]() -> Status {
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

// FLUX: the one *.safetensors file of a transformer/ without config.json, in the original
// single-file layout (flux1-dev.safetensors as ComfyUI and Forge hold it).
Result<TensorMap> LoadFluxSingleFile(const std::string& dir) {
  Result<std::vector<std::string>> names = files::ListDir(dir);
  if (!names.ok()) return Named(dir, names.status());
  std::vector<std::string> found;
  for (const std::string& n : *names) {
    if (n.size() > 12 && n.compare(n.size() - 12, 12, ".safetensors") == 0) found.push_back(n);
  }
  if (found.size() != 1) {
    return Status::Invalid(dir +
                           ": without config.json it must hold exactly one .safetensors "
                           "file (a single-file FLUX checkpoint); found " +
                           std::to_string(found.size()));
  }
  const std::string path = dir + "/" + found.front();
  Result<TensorMap> w = LoadWeights(path);
  if (!w.ok()) return Named(path, w.status());
  if (!flux::IsFluxSingleFile(*w)) {
    return Status::Invalid(path +
                           ": not a FLUX single-file checkpoint (no img_in and "
                           "double_blocks/single_blocks keys) and no config.json beside it");
  }
  return w;
}

// FLUX: text_encoder_2/config.json (T5) and tokenizer_2/tokenizer.json (the model is built later,
// BuildT5Model).
Result<T5Part> LoadT5Part(const std::string& root) {
  const std::string enc = root + "/text_encoder_2", tok = root + "/tokenizer_2";
  GLEANER_RETURN_IF_ERROR(RequireDir(enc));
  GLEANER_RETURN_IF_ERROR(RequireDir(tok));
  T5Part part;
  if (!files::Exists(tok + "/tokenizer.json")) {
    return Status::NotFound(tok + "/tokenizer.json: missing (FLUX's T5 tokenizer)");
  }
  Result<text::T5Tokenizer> t = text::T5Tokenizer::Load(tok);
  if (!t.ok()) return Named(tok + "/tokenizer.json", t.status());
  part.tokenizer = *t;
  const std::string config_path = enc + "/config.json";
  if (!files::Exists(config_path)) return Status::NotFound(config_path + ": missing");
  Result<text::T5Config> c = text::LoadT5Config(config_path);
  if (!c.ok()) return Named(config_path, c.status());
  part.config = *c;
  if (int64_t(part.tokenizer.vocab_size()) > part.config.vocab_size) {
    return Status::Invalid(tok + "/tokenizer.json: " + std::to_string(part.tokenizer.vocab_size()) +
                           " pieces, more than " + config_path + "'s vocab_size " +
                           std::to_string(part.config.vocab_size));
  }
  return part;
}

Status BuildT5Model(const std::string& root, T5Part* part) {
  const std::string enc = root + "/text_encoder_2";
  Result<std::string> w = FindComponentWeights(enc, "model");
  if (!w.ok()) return w.status();
  Result<std::shared_ptr<text::T5Encoder>> m = text::LoadT5Encoder(enc + "/config.json", *w);
  if (!m.ok()) return Named(*w, m.status());
  (*m)->eval();
  part->model = *m;
  return Status::Ok();
}

std::string Int(int64_t v) {
  return std::to_string(v);
}

// FLUX's cross-component shape rules (the header).
Status CheckFluxFits(const DiffusersModel& m) {
  const DenoiserShape s = m.denoiser_shape();
  const std::string transformer = m.dir + "/transformer/config.json";
  if (m.vae_config.latent_channels != s.latent_channels) {
    return Status::Invalid(m.dir + "/vae/config.json: latent_channels " +
                           Int(m.vae_config.latent_channels) + " but " + transformer +
                           " takes 2x2 patches of " + Int(s.latent_channels) + " channels");
  }
  if (m.text[0].config.hidden_size != s.pooled_dim) {
    return Status::Invalid(m.dir + "/text_encoder/config.json: hidden_size " +
                           Int(m.text[0].config.hidden_size) + " but " + transformer +
                           " has pooled_projection_dim " + Int(s.pooled_dim));
  }
  if (m.t5->config.d_model != s.context_dim) {
    return Status::Invalid(m.dir + "/text_encoder_2/config.json: d_model " +
                           Int(m.t5->config.d_model) + " but " + transformer +
                           " has joint_attention_dim " + Int(s.context_dim));
  }
  return Status::Ok();
}

// The cross-component shape rules of the header.
Status CheckFits(const DiffusersModel& m) {
  if (m.flux()) return CheckFluxFits(m);
  const unet::UNetConfig& u = *m.unet();
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
  if (options.denoiser_dtype != torch::kFloat32 && options.denoiser_dtype != torch::kFloat16 &&
      options.denoiser_dtype != torch::kBFloat16) {
    return Status::Invalid("diffusers model: denoiser_dtype must be F32, F16 or BF16");
  }
  DiffusersModel m;
  m.dir = dir;
  GLEANER_RETURN_IF_ERROR(RequireDir(dir));
  Result<Json> index = ReadJsonObject(dir + "/model_index.json");
  if (!index.ok()) return index.status();
  m.model_index = std::move(*index);

  // The denoiser: transformer/ (FLUX.1) or unet/.
  const bool flux = files::IsDir(dir + "/transformer");
  if (flux && files::IsDir(dir + "/unet")) {
    return Status::Invalid(dir + ": holds both unet/ and transformer/ (one denoiser per model)");
  }
  const std::string denoiser_dir = dir + (flux ? "/transformer" : "/unet");
  GLEANER_RETURN_IF_ERROR(RequireDir(denoiser_dir));
  const bool has_config = !flux || files::Exists(denoiser_dir + "/config.json");
  Result<Json> denoiser_json =
      has_config ? ReadJsonObject(denoiser_dir + "/config.json") : Result<Json>(Json::object());
  if (!denoiser_json.ok()) return denoiser_json.status();
  TensorMap single_file;  // FLUX: a transformer/ holding one original-layout checkpoint
  if (flux && !files::Exists(denoiser_dir + "/config.json")) {
    Result<TensorMap> w = LoadFluxSingleFile(denoiser_dir);
    if (!w.ok()) return w.status();
    Result<flux::FluxConfig> c = flux::InferFluxConfig(*w);
    if (!c.ok()) return Named(denoiser_dir, c.status());
    m.denoiser_config = std::move(*c);
    single_file = std::move(*w);
  } else if (flux) {
    Result<flux::FluxConfig> c = flux::ParseFluxConfig(*denoiser_json);
    if (!c.ok()) return Named(denoiser_dir + "/config.json", c.status());
    m.denoiser_config = std::move(*c);
  } else {
    Result<unet::UNetConfig> c = unet::ParseUNetConfig(*denoiser_json);
    if (!c.ok()) return Named(denoiser_dir + "/config.json", c.status());
    m.denoiser_config = std::move(*c);
  }

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
  if (m.flux()) {
    Result<T5Part> t5 = LoadT5Part(dir);
    if (!t5.ok()) return t5.status();
    m.t5 = std::move(*t5);
  }

  Result<Json> scheduler = ReadJsonObject(dir + "/scheduler/scheduler_config.json");
  if (!scheduler.ok()) return scheduler.status();
  m.scheduler_config = std::move(*scheduler);

  GLEANER_RETURN_IF_ERROR(CheckFits(m));
  if (options.before_large_files) GLEANER_RETURN_IF_ERROR(options.before_large_files(m));
  // The large files last, once everything small is known to fit.
  if (options.text_encoders) {
    for (TextEncoderPart& part : m.text) GLEANER_RETURN_IF_ERROR(BuildTextModel(dir, &part));
    if (m.t5) GLEANER_RETURN_IF_ERROR(BuildT5Model(dir, &*m.t5));
  }
  if (options.vae) {
    Result<std::shared_ptr<vae::AutoencoderKL>> v = LoadVae(vae_dir, m.vae_config);
    if (!v.ok()) return v.status();
    m.vae = *v;
  }
  if (options.denoiser && !single_file.empty()) {
    Result<TensorMap> w = flux::DiffusersFromSingleFile(single_file);
    if (!w.ok()) return Named(denoiser_dir, w.status());
    single_file.clear();
    GLEANER_RETURN_IF_ERROR(CatchTorch("converting the transformer weights", [&]() -> Status {
      for (auto& [name, t] : *w) {
        if (t.is_floating_point() && t.scalar_type() != options.denoiser_dtype &&
            t.element_size() >= 2) {
          t = t.to(options.denoiser_dtype);
        }
      }
      return Status::Ok();
    }));
    m.denoiser_weights = std::move(*w);
  } else if (options.denoiser) {
    Result<TensorMap> w = LoadDenoiserWeights(denoiser_dir, options.denoiser_dtype);
    if (!w.ok()) return w.status();
    m.denoiser_weights = std::move(*w);
  }
  return m;
}

}  // namespace gleaner::train::models
