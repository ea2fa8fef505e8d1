#include "agent/train/sampling/diffusers_pipeline.h"

namespace gleaner::train::sampling {
namespace {

// FLUX.1: CLIP-L for the pooled embedding, T5 for the tokens, the flow-match Euler sampler.
Result<TextToImageModel> FluxTextToImageFrom(const models::DiffusersModel& model,
                                             std::shared_ptr<Denoiser> denoiser,
                                             const std::string& sampler) {
  if (!sampler.empty() && sampler != "flow-match-euler") {
    return Status::Invalid("sampler \"" + sampler +
                           "\": a FLUX model samples with flow-match-euler only");
  }
  Result<FlowMatchConfig> flow = ParseFlowMatchConfig(model.scheduler_config);
  if (!flow.ok()) {
    return Status::Invalid(model.dir +
                           "/scheduler/scheduler_config.json: " + flow.status().message());
  }
  if (model.text.empty() || !model.text[0].model || !model.t5 || !model.t5->model) {
    return Status::Invalid(model.dir + ": the text encoders were not loaded");
  }
  TextToImageModel m;
  m.encoders.push_back({model.text[0].tokenizer, model.text[0].model});
  m.t5 = T5PromptEncoder{model.t5->tokenizer, model.t5->model, 512};
  m.denoiser = std::move(denoiser);
  m.vae = model.vae;
  m.flow_match = *flow;
  GLEANER_RETURN_IF_ERROR(CheckTextToImageModel(m));
  return m;
}

}  // namespace

Result<TextToImageModel> TextToImageFrom(const models::DiffusersModel& model,
                                         std::shared_ptr<Denoiser> denoiser,
                                         const std::string& sampler) {
  if (model.flux()) return FluxTextToImageFrom(model, std::move(denoiser), sampler);
  Result<SamplerKind> kind =
      sampler.empty() ? SamplerKindOfConfig(model.scheduler_config) : ParseSamplerKind(sampler);
  if (!kind.ok() && !sampler.empty()) return kind.status();
  const std::string where = model.dir + "/scheduler/scheduler_config.json: ";
  Result<SchedulerConfig> config =
      ParseSchedulerConfig(model.scheduler_config, kind.ok() ? *kind : SamplerKind::kEuler);
  if (!config.ok()) return Status::Invalid(where + config.status().message());
  TextToImageModel m;
  for (const models::TextEncoderPart& part : model.text) {
    if (!part.model) return Status::Invalid(model.dir + ": the text encoders were not loaded");
    m.encoders.push_back({part.tokenizer, part.model});
  }
  m.denoiser = std::move(denoiser);
  m.vae = model.vae;
  m.scheduler = *config;
  const Json& flag = model.model_index.value("force_zeros_for_empty_prompt", Json(true));
  m.force_zeros_for_empty_prompt = !flag.is_boolean() || flag.get<bool>();
  GLEANER_RETURN_IF_ERROR(CheckTextToImageModel(m));
  return m;
}

}  // namespace gleaner::train::sampling
