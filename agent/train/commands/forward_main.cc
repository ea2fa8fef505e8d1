// `gleaner-train forward`: runs a denoiser once on given inputs and writes the output (and LoRA
// gradients), so any reference implementation can be checked against this one.
//
//   gleaner-train forward --config C --weights W --inputs I [--lora L] [--grad-weights R] --out O
//                         [--device cpu|cuda] [--dtype fp32|bf16|fp16]
//
// The config picks the family: a FluxTransformer2DModel config (or no --config with a FLUX
// single-file W, whose config is inferred) runs FLUX (flux_forward.h: its inputs and output);
// any other config is a UNet2DConditionModel's, as below.
// I: safetensors with `sample` [B,C,H,W], `timestep` [B] (or scalar), `encoder_hidden_states`,
//    and, when the config has addition_embed_type "text_time" (SDXL), `text_embeds` [B,P] and
//    `time_ids` [B,6].
// R: safetensors with tensor `R` (or exactly one tensor) shaped like the output; needs --lora.
// O: safetensors with `sample` and, with R, the gradients of sum(output * R) under the LoRA's
//    PEFT key names (metadata loss_value); always fp32.
// --device: where the UNet runs (default cpu). --dtype: fp32 (default; on CUDA without TF32, as
// the references were computed), or bf16/fp16 as diffusers trains in mixed precision: base
// weights cast to that dtype, LoRA in fp32, autocast to it around the forward pass (fp16: CUDA
// only).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "agent/protocol/trainer_protocol.h"
#include "agent/train/commands/commands.h"
#include "agent/train/commands/flux_forward.h"
#include "agent/train/commands/forward_output.h"
#include "agent/train/denoiser/denoiser_lora.h"
#include "agent/train/models/flux/flux_config.h"
#include "agent/train/models/loader/tiny_diffusers_model.h"
#include "agent/train/models/unet/unet.h"
#include "agent/train/nn/torch_compat.h"
#include "agent/train/nn/torch_io.h"

namespace gleaner::train {
namespace {

using namespace unet;

struct ForwardArgs {
  std::string config, weights, inputs, lora, grad_weights, out;
  std::string device = "cpu", dtype = "fp32";
};

// --device/--dtype (values already checked by ForwardMain) as a device and autocast dtype.
Status ResolveDevice(const ForwardArgs& a, torch::Device* device, c10::ScalarType* dtype) {
  if (a.device == "cuda" && !torch::cuda::is_available()) {
    return Status::Invalid("--device cuda: no CUDA device (or a CPU-only libtorch)");
  }
  *device = a.device == "cuda" ? torch::Device(torch::kCUDA, 0) : torch::Device(torch::kCPU);
  *dtype = a.dtype == "bf16"   ? torch::kBFloat16
           : a.dtype == "fp16" ? torch::kFloat16
                               : torch::kFloat32;
  return Status::Ok();
}

Status RunForward(const ForwardArgs& a) {
  torch::Device device = torch::kCPU;
  c10::ScalarType dtype = torch::kFloat32;
  GLEANER_RETURN_IF_ERROR(ResolveDevice(a, &device, &dtype));
  FluxForwardArgs fa{nullptr,        a.weights, a.inputs, a.lora,
                     a.grad_weights, a.out,     a.device, a.dtype};
  if (a.config.empty()) return RunFluxForward(fa);  // a FLUX single file, or an error
  Result<std::string> text = ReadFile(a.config);
  if (!text.ok()) return text.status();
  Result<Json> j = ParseJson(*text);
  if (!j.ok()) return Status::Invalid(a.config + ": " + j.status().message());
  if (flux::IsFluxConfig(*j)) {
    fa.config = &*j;
    Status s = RunFluxForward(fa);
    if (!s.ok() && s.message().rfind("config.", 0) == 0) {
      return Status(s.code(), a.config + ": " + s.message());
    }
    return s;
  }
  Result<UNetConfig> cfg = ParseUNetConfig(*j);
  if (!cfg.ok()) return cfg.status();
  Result<TensorMap> weights = LoadWeights(a.weights);
  if (!weights.ok()) return weights.status();
  Result<TensorMap> inputs = LoadSafetensors(a.inputs);
  if (!inputs.ok()) return inputs.status();
  std::vector<const char*> need = {"sample", "timestep", "encoder_hidden_states"};
  if (cfg->has_text_time()) {
    need.push_back("text_embeds");
    need.push_back("time_ids");
  }
  for (const char* k : need) {
    if (!inputs->count(k)) {
      return Status::Invalid(a.inputs + ": missing tensor " + k +
                             (cfg->has_text_time() ? " (the config has text_time: SDXL)" : ""));
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
  return CatchTorch("forward", [&]() -> Status {
    UNet unet(*cfg);
    GLEANER_RETURN_IF_ERROR(LoadStateDict(unet, *weights));
    unet.eval();
    if (device.is_cuda() && dtype == torch::kFloat32) UseFullFp32();
    unet.to(device, dtype);  // LoRA, attached below, stays fp32
    DenoiserLora lora;
    if (!a.lora.empty()) {
      Result<DenoiserLora> l = DenoiserLora::Load(unet, a.lora);
      if (!l.ok()) return l.status();
      lora = std::move(*l);
    }
    torch::Tensor sample = inputs->at("sample").to(device, torch::kFloat32);
    torch::Tensor ctx = inputs->at("encoder_hidden_states").to(device, torch::kFloat32);
    torch::Tensor t = inputs->at("timestep").to(device);
    AddedCond added;
    if (cfg->has_text_time()) {
      added.text_embeds = inputs->at("text_embeds").to(device, torch::kFloat32);
      added.time_ids = inputs->at("time_ids").to(device, torch::kFloat32);
    }
    torch::Tensor y;
    {
      // Autocast covers the forward pass only; backward runs outside it, as in training.
      std::optional<AutocastScope> autocast;
      if (dtype != torch::kFloat32) autocast.emplace(device.type(), dtype);
      torch::AutoGradMode grad_mode(r.defined());
      y = unet.forward(sample, t, ctx, added).to(torch::kFloat32);
    }
    return WriteForwardOutput(y, r, lora, a.out);
  });
}

}  // namespace

int ForwardMain(int argc, char** argv) {
  ForwardArgs a;
  for (int i = 0; i < argc; ++i) {
    std::string k = argv[i];
    std::string* dst = k == "--config"         ? &a.config
                       : k == "--weights"      ? &a.weights
                       : k == "--inputs"       ? &a.inputs
                       : k == "--lora"         ? &a.lora
                       : k == "--grad-weights" ? &a.grad_weights
                       : k == "--out"          ? &a.out
                       : k == "--device"       ? &a.device
                       : k == "--dtype"        ? &a.dtype
                                               : nullptr;
    if (dst == nullptr || i + 1 >= argc) {
      std::fprintf(stderr, "gleaner-train forward: unknown or incomplete argument %s\n", argv[i]);
      return kExitUsage;
    }
    *dst = argv[++i];
  }
  bool device_ok =
      (a.device == "cpu" && (a.dtype == "fp32" || a.dtype == "bf16")) ||
      (a.device == "cuda" && (a.dtype == "fp32" || a.dtype == "bf16" || a.dtype == "fp16"));
  if (!device_ok) {
    std::fprintf(stderr,
                 "gleaner-train forward: --device cpu|cuda, --dtype fp32|bf16 (fp16: cuda only)\n");
    return kExitUsage;
  }
  if (a.weights.empty() || a.inputs.empty() || a.out.empty()) {
    std::fprintf(stderr,
                 "usage: gleaner-train forward [--config C] --weights W --inputs I [--lora L] "
                 "[--grad-weights R] --out O\n"
                 "       [--device cpu|cuda] [--dtype fp32|bf16|fp16]\n"
                 "  (--config may be left out for a FLUX single-file W)\n");
    return kExitUsage;
  }
  Status s = RunForward(a);
  if (!s.ok()) {
    std::fprintf(stderr, "gleaner-train forward: %s\n", s.ToString().c_str());
    return kExitFailed;
  }
  return 0;
}

int MakeModelMain(int argc, char** argv) {
  std::string config, out, diffusers;
  long long seed = 0;
  bool sdxl = false, flux = false;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--flux") == 0) {
      flux = true;
    } else if (std::strcmp(argv[i], "--sdxl") == 0) {
      sdxl = true;
    } else {
      args.push_back(argv[i]);
    }
  }
  argc = int(args.size());
  argv = args.data();
  for (int i = 0; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    if (k == "--config") {
      config = argv[i + 1];
    } else if (k == "--out") {
      out = argv[i + 1];
    } else if (k == "--seed") {
      seed = std::atoll(argv[i + 1]);
    } else if (k == "--diffusers") {
      diffusers = argv[i + 1];
    } else {
      out.clear();
      diffusers.clear();
      break;
    }
  }
  if ((out.empty() == diffusers.empty()) || argc % 2 != 0 ||
      (!config.empty() && (sdxl || !diffusers.empty())) || (flux && (sdxl || diffusers.empty()))) {
    std::fprintf(stderr,
                 "usage: gleaner-train make-model --out WEIGHTS [--config C | --sdxl] [--seed S]\n"
                 "       gleaner-train make-model --diffusers DIR [--sdxl | --flux] [--seed S]\n"
                 "  (random weights for config C; without C the tiny test config, SD-style or\n"
                 "   with --sdxl SDXL-style, whose config.json is written next to WEIGHTS;\n"
                 "   --diffusers: a whole tiny model folder, models/tiny_diffusers_model.h)\n");
    return kExitUsage;
  }
  if (!diffusers.empty()) {
    Status s = flux ? models::WriteTinyFluxModel(diffusers, uint64_t(seed))
                    : models::WriteTinyDiffusersModel(diffusers, sdxl, uint64_t(seed));
    if (!s.ok()) {
      std::fprintf(stderr, "gleaner-train make-model: %s\n", s.ToString().c_str());
      return kExitFailed;
    }
    return 0;
  }
  Status s = CatchTorch("make-model", [&]() -> Status {
    UNetConfig cfg = sdxl ? TinySdxlConfig() : TinyConfig();
    if (!config.empty()) {
      Result<std::string> text = ReadFile(config);
      if (!text.ok()) return text.status();
      Result<Json> j = ParseJson(*text);
      if (!j.ok()) return Status::Invalid(config + ": " + j.status().message());
      Result<UNetConfig> c = ParseUNetConfig(*j);
      if (!c.ok()) return c.status();
      cfg = *c;
    } else {
      size_t slash = out.rfind('/');
      std::string dir = slash == std::string::npos ? "" : out.substr(0, slash + 1);
      GLEANER_RETURN_IF_ERROR(
          WriteFileDurable(dir + "config.json", UNetConfigToJson(cfg).dump(2) + "\n"));
    }
    return SaveSafetensors(out, RandomWeights(cfg, uint64_t(seed)));
  });
  if (!s.ok()) {
    std::fprintf(stderr, "gleaner-train make-model: %s\n", s.ToString().c_str());
    return kExitFailed;
  }
  return 0;
}

}  // namespace gleaner::train
