#include "agent/train/commands/flux_forward.h"

#include <cstdio>
#include <map>
#include <optional>

#include "agent/train/commands/forward_output.h"
#include "agent/train/denoiser/denoiser_lora.h"
#include "agent/train/models/flux/flux_denoiser.h"
#include "agent/train/models/flux/flux_single_file.h"
#include "agent/train/nn/torch_compat.h"
#include "agent/train/nn/torch_io.h"

namespace gleaner::train {

Status RunFluxForward(const FluxForwardArgs& a) {
  if (a.device == "cuda" && !torch::cuda::is_available()) {
    return Status::Invalid("--device cuda: no CUDA device (or a CPU-only libtorch)");
  }
  torch::Device device =
      a.device == "cuda" ? torch::Device(torch::kCUDA, 0) : torch::Device(torch::kCPU);
  c10::ScalarType dtype = a.dtype == "bf16"   ? torch::kBFloat16
                          : a.dtype == "fp16" ? torch::kFloat16
                                              : torch::kFloat32;
  Result<TensorMap> weights = LoadWeights(a.weights);
  if (!weights.ok()) return weights.status();
  const bool single_file = flux::IsFluxSingleFile(*weights);
  if (a.config == nullptr && !single_file) {
    return Status::Invalid(a.weights + ": not a FLUX single file, so --config is needed");
  }
  Result<flux::FluxConfig> cfg =
      a.config != nullptr ? flux::ParseFluxConfig(*a.config) : flux::InferFluxConfig(*weights);
  if (!cfg.ok()) return cfg.status();
  if (single_file) {
    Result<TensorMap> conv = flux::DiffusersFromSingleFile(*weights);
    if (!conv.ok()) return Status::Invalid(a.weights + ": " + conv.status().message());
    *weights = std::move(*conv);
  }
  Result<TensorMap> inputs = LoadSafetensors(a.inputs);
  if (!inputs.ok()) return inputs.status();
  std::vector<const char*> need = {
      "hidden_states", "encoder_hidden_states", "pooled_projections", "timestep", "img_ids",
      "txt_ids"};
  if (cfg->guidance_embeds) need.push_back("guidance");
  for (const char* k : need) {
    if (!inputs->count(k)) {
      return Status::Invalid(
          a.inputs + ": missing tensor " + k +
          (std::string(k) == "guidance" ? " (the config has guidance_embeds)" : ""));
    }
  }
  torch::Tensor r;
  if (!a.grad_weights.empty()) {
    if (a.lora.empty()) return Status::Invalid("--grad-weights needs --lora");
    Result<TensorMap> rf = LoadSafetensors(a.grad_weights);
    if (!rf.ok()) return rf.status();
    if (rf->count("R")) {
      r = rf->at("R");
    } else if (rf->size() == 1) {
      r = rf->begin()->second;
    } else {
      return Status::Invalid(a.grad_weights + ": expected a tensor named R");
    }
  }
  BasePlacement placement;
  placement.device = device;
  placement.dtype = dtype;
  if (device.is_cuda() && dtype == torch::kFloat32) UseFullFp32();
  Result<std::shared_ptr<flux::FluxDenoiser>> net =
      flux::BuildFluxDenoiser(*cfg, *weights, placement);
  if (!net.ok()) return Status::Invalid(a.weights + ": " + net.status().message());
  weights->clear();
  return CatchTorch("forward", [&]() -> Status {
    flux::FluxTransformer& model = (*net)->transformer();
    model.eval();
    DenoiserLora lora;
    if (!a.lora.empty()) {
      Result<DenoiserLora> l = DenoiserLora::Load(**net, a.lora);
      if (!l.ok()) return l.status();
      lora = std::move(*l);
    }
    auto in = [&](const char* k) { return inputs->at(k).to(device, torch::kFloat32); };
    torch::Tensor y;
    {
      std::optional<AutocastScope> autocast;
      if (dtype != torch::kFloat32) autocast.emplace(device.type(), dtype);
      torch::AutoGradMode grad_mode(r.defined());
      y = model
              .forward(in("hidden_states"), in("encoder_hidden_states"), in("pooled_projections"),
                       in("timestep"), in("img_ids"), in("txt_ids"),
                       cfg->guidance_embeds ? in("guidance") : torch::Tensor())
              .to(torch::kFloat32);
    }
    return WriteForwardOutput(y, r, lora, a.out);
  });
}

}  // namespace gleaner::train
