#include "agent/train/sampling/text_to_image.h"

#include <optional>

#include "agent/train/models/vae/image_latents.h"
#include "agent/train/nn/torch_compat.h"
#include "agent/train/nn/torch_io.h"
#include "agent/train/sampling/sampling_loop.h"
#include "agent/train/sampling/scheduler.h"

namespace gleaner::train::sampling {
namespace {

using torch::Tensor;

// Puts a module tree in eval mode and back into the mode it had.
class EvalMode {
 public:
  explicit EvalMode(torch::nn::Module* m) : m_(m), was_training_(m->is_training()) { m->eval(); }
  ~EvalMode() { m_->train(was_training_); }

 private:
  torch::nn::Module* m_;
  bool was_training_;
};

torch::Device DeviceOf(torch::nn::Module& m) {
  std::vector<Tensor> ps = m.parameters();
  return ps.empty() ? torch::Device(torch::kCPU) : ps.front().device();
}

// The conditioning of one prompt: the denoiser's context, and SDXL's pooled embedding.
struct PromptEmbeds {
  Tensor context;  // [1,T,D]
  Tensor pooled;   // [1,P]; undefined for SD 1.x/2.x
};

Result<PromptEmbeds> EncodePrompt(const TextToImageModel& m, const std::string& prompt) {
  const bool sdxl = m.encoders.size() == 2;
  std::vector<Tensor> hidden;
  PromptEmbeds out;
  for (const PromptEncoder& e : m.encoders) {
    const int64_t length = e.model->config().max_position_embeddings;
    Result<std::vector<int32_t>> ids = e.tokenizer.Encode(prompt, size_t(length));
    if (!ids.ok()) return ids.status();
    std::vector<int64_t> ids64(ids->begin(), ids->end());
    Tensor t = torch::tensor(ids64, torch::kInt64).view({1, length}).to(DeviceOf(*e.model));
    GLEANER_RETURN_IF_ERROR(text::CheckInputIds(e.model->config(), t));
    text::ClipTextOutput o = e.model->forward(t);
    hidden.push_back(sdxl ? o.penultimate_hidden_state : o.last_hidden_state);
    if (sdxl) out.pooled = o.text_embeds;  // the last encoder's, as diffusers keeps it
  }
  out.context = torch::cat(hidden, -1);
  return out;
}

// FLUX: T5's states and CLIP's pooled output of one prompt, and the embedded guidance.
Result<Conditioning> EncodeFluxConditioning(const TextToImageModel& m, const ImageRequest& r) {
  const torch::Device device = m.denoiser->placement().device;
  const PromptEncoder& clip = m.encoders.front();
  const int64_t length = clip.model->config().max_position_embeddings;
  Result<std::vector<int32_t>> ids = clip.tokenizer.Encode(r.prompt, size_t(length));
  if (!ids.ok()) return ids.status();
  std::vector<int64_t> ids64(ids->begin(), ids->end());
  Tensor t = torch::tensor(ids64, torch::kInt64).view({1, length}).to(DeviceOf(*clip.model));
  GLEANER_RETURN_IF_ERROR(text::CheckInputIds(clip.model->config(), t));
  Conditioning out;
  out.pooled = clip.model->forward(t).pooler_output.to(device, torch::kFloat32);
  std::vector<int64_t> t5 = m.t5->tokenizer.Encode(r.prompt, size_t(m.t5->max_sequence_length));
  Tensor t5_ids =
      torch::tensor(t5, torch::kInt64).view({1, int64_t(t5.size())}).to(DeviceOf(*m.t5->model));
  GLEANER_RETURN_IF_ERROR(text::CheckT5InputIds(m.t5->model->config(), t5_ids));
  out.text = m.t5->model->forward(t5_ids).to(device, torch::kFloat32);
  if (m.denoiser->shape().guidance) {
    out.guidance = torch::full({1}, r.guidance_scale,
                               torch::TensorOptions().dtype(torch::kFloat32).device(device));
  }
  return out;
}

// FluxPipeline's loop (the header): Euler steps of the flow over FluxPipeline's schedule.
Result<Tensor> SampleFlowMatch(const TextToImageModel& m, const ImageRequest& r,
                               const Conditioning& cond, const Tensor& noise,
                               const std::function<bool()>& stop, bool* stopped) {
  const int64_t seq = (noise.size(2) / 2) * (noise.size(3) / 2);
  Result<FlowMatchSchedule> schedule = InferenceSchedule(*m.flow_match, int(r.steps), seq);
  if (!schedule.ok()) return schedule.status();
  const BasePlacement& p = m.denoiser->placement();
  Tensor x = noise;
  for (size_t i = 0; i < schedule->timesteps.size(); ++i) {
    if (stop && stop()) {
      *stopped = true;
      return Tensor();
    }
    // FluxPipeline passes timestep / 1000 (fp32); the transformer scales it back.
    Tensor t = torch::full({1}, float(schedule->timesteps[i]),
                           torch::TensorOptions().dtype(torch::kFloat32)) /
               1000.0f;
    Tensor v;
    {
      std::optional<AutocastScope> autocast;
      if (p.device.is_cuda() && p.dtype != torch::kFloat32) autocast.emplace(c10::kCUDA, p.dtype);
      v = m.denoiser->Forward(x, t.to(p.device), cond).to(torch::kFloat32);
    }
    x = EulerStep(v, schedule->sigmas[i], schedule->sigmas[i + 1], x);
  }
  return x;
}

}  // namespace

Status CheckTextToImageModel(const TextToImageModel& m) {
  if (!m.denoiser || !m.vae) return Status::Invalid("text to image: needs a denoiser and a VAE");
  const DenoiserShape u = m.denoiser->shape();
  if (m.t5 || m.flow_match) {
    if (!m.t5 || !m.t5->model || !m.flow_match || m.encoders.size() != 1 || !m.encoders[0].model) {
      return Status::Invalid(
          "text to image: a flow-match model needs T5, one CLIP encoder and its scheduler");
    }
    if (m.t5->model->config().d_model != u.context_dim) {
      return Status::Invalid(
          "text to image: T5 gives " + std::to_string(m.t5->model->config().d_model) +
          " features, the denoiser's context width is " + std::to_string(u.context_dim));
    }
    if (m.encoders[0].model->config().hidden_size != u.pooled_dim) {
      return Status::Invalid(
          "text to image: CLIP gives " + std::to_string(m.encoders[0].model->config().hidden_size) +
          " pooled features, the denoiser takes " + std::to_string(u.pooled_dim));
    }
    if (m.vae->config().latent_channels != u.latent_channels) {
      return Status::Invalid("text to image: the VAE has " +
                             std::to_string(m.vae->config().latent_channels) +
                             " latent channels, the denoiser " + std::to_string(u.latent_channels));
    }
    return Status::Ok();
  }
  const size_t want = u.time_ids ? 2 : 1;
  if (m.encoders.size() != want) {
    return Status::Invalid("text to image: this denoiser needs " + std::to_string(want) +
                           " text encoder(s), got " + std::to_string(m.encoders.size()));
  }
  int64_t width = 0;
  for (const PromptEncoder& e : m.encoders) {
    if (!e.model) return Status::Invalid("text to image: a text encoder is missing");
    width += e.model->config().hidden_size;
  }
  if (width != u.context_dim) {
    return Status::Invalid("text to image: the text encoders give " + std::to_string(width) +
                           " features, the denoiser's context width is " +
                           std::to_string(u.context_dim));
  }
  if (u.time_ids) {
    const text::ClipTextConfig& c2 = m.encoders[1].model->config();
    if (!c2.with_projection || c2.projection_dim != u.pooled_dim) {
      return Status::Invalid("text to image: SDXL's second text encoder needs a projection of " +
                             std::to_string(u.pooled_dim) + " features");
    }
  }
  const vae::VaeConfig& v = m.vae->config();
  if (v.latent_channels != u.latent_channels) {
    return Status::Invalid("text to image: the VAE has " + std::to_string(v.latent_channels) +
                           " latent channels, the denoiser " + std::to_string(u.latent_channels));
  }
  return Status::Ok();
}

Result<Conditioning> EncodeConditioning(const TextToImageModel& m, const ImageRequest& r) {
  if (m.t5) return EncodeFluxConditioning(m, r);
  const bool sdxl = m.denoiser->shape().time_ids;
  const bool guided = r.guidance_scale > 1.0;
  const torch::Device device = m.denoiser->placement().device;
  Result<PromptEmbeds> cond = EncodePrompt(m, r.prompt);
  if (!cond.ok()) return cond.status();
  PromptEmbeds uncond;
  if (guided && sdxl && r.negative_prompt.empty() && m.force_zeros_for_empty_prompt) {
    uncond = {torch::zeros_like(cond->context), torch::zeros_like(cond->pooled)};
  } else if (guided) {
    Result<PromptEmbeds> u = EncodePrompt(m, r.negative_prompt);
    if (!u.ok()) return u.status();
    uncond = *u;
  }
  // Rows: [uncond; cond] when guided, else cond alone.
  auto rows = [&](const Tensor& u, const Tensor& c) {
    return (guided ? torch::cat({u, c}) : c).to(device, torch::kFloat32);
  };
  Conditioning out;
  out.text = rows(uncond.context, cond->context);
  if (sdxl) {
    Tensor ids = torch::tensor({double(r.height), double(r.width), 0.0, 0.0, double(r.height),
                                double(r.width)},
                               torch::kFloat32)
                     .view({1, 6});
    out.pooled = rows(uncond.pooled, cond->pooled);
    out.time_ids = rows(ids, ids);
  }
  return out;
}

Result<Tensor> RenderImage(const TextToImageModel& m, const ImageRequest& r,
                           const std::function<bool()>& stop) {
  GLEANER_RETURN_IF_ERROR(CheckTextToImageModel(m));
  const int f = m.vae->config().spatial_factor();
  if (r.height < f || r.width < f || r.height % f != 0 || r.width % f != 0) {
    return Status::Invalid("text to image: height and width must be positive multiples of " +
                           std::to_string(f));
  }
  std::unique_ptr<Scheduler> scheduler;
  if (!m.flow_match) {
    scheduler = MakeScheduler(m.scheduler);
    GLEANER_RETURN_IF_ERROR(scheduler->SetTimesteps(r.steps));
  }
  Tensor image;
  bool stopped = false;
  GLEANER_RETURN_IF_ERROR(CatchTorch("text to image", [&]() -> Status {
    torch::NoGradGuard no_grad;
    std::vector<std::unique_ptr<EvalMode>> modes;
    for (const PromptEncoder& e : m.encoders)
      modes.push_back(std::make_unique<EvalMode>(&*e.model));
    if (m.t5) modes.push_back(std::make_unique<EvalMode>(&*m.t5->model));
    modes.push_back(std::make_unique<EvalMode>(&m.denoiser->module()));
    modes.push_back(std::make_unique<EvalMode>(&*m.vae));

    Result<Conditioning> cond = EncodeConditioning(m, r);
    if (!cond.ok()) return cond.status();
    const torch::Device device = m.denoiser->placement().device;
    DenoiseFn denoise = [&](const Tensor& x, const Tensor& t) -> Result<Tensor> {
      if (stop && stop()) {
        stopped = true;
        return Status::Unavailable("stopped");
      }
      // Autocast in the compute dtype while it runs on CUDA with 16-bit base weights.
      const BasePlacement& p = m.denoiser->placement();
      std::optional<AutocastScope> autocast;
      if (p.device.is_cuda() && p.dtype != torch::kFloat32) autocast.emplace(c10::kCUDA, p.dtype);
      return m.denoiser->Forward(x, t.to(device), *cond).to(torch::kFloat32);
    };
    if (r.guidance_scale > 1.0 && !m.flow_match) denoise = WithGuidance(denoise, r.guidance_scale);
    torch::Generator gen = at::detail::createCPUGenerator(r.seed);
    Tensor noise = torch::randn({1, m.denoiser->shape().latent_channels, r.height / f, r.width / f},
                                gen, torch::TensorOptions().dtype(torch::kFloat32))
                       .to(device);
    Result<Tensor> x0 = m.flow_match ? SampleFlowMatch(m, r, *cond, noise, stop, &stopped)
                                     : Sample(*scheduler, noise, denoise);
    if (stopped) return Status::Ok();
    if (!x0.ok()) return x0.status();
    Result<Tensor> images = vae::DecodeToImages(*m.vae, x0->to(DeviceOf(*m.vae)));
    if (!images.ok()) return images.status();
    image = *images;
    return Status::Ok();
  }));
  if (stopped) return Tensor();
  return image;
}

}  // namespace gleaner::train::sampling
