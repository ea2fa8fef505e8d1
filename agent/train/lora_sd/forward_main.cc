// `gleaner-train forward`: runs the UNet once on given inputs and writes the output (and LoRA
// gradients), so any reference implementation can be checked against this one.
//
//   gleaner-train forward --config C --weights W --inputs I [--lora L] [--grad-weights R] --out O
//
// I: safetensors with `sample` [B,C,H,W], `timestep` [B] (or scalar), `encoder_hidden_states`.
// R: safetensors with tensor `R` (or exactly one tensor) shaped like the output; needs --lora.
// O: safetensors with `sample` and, with R, the gradients of sum(output * R) under the LoRA's
//    PEFT key names (metadata loss_value).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "agent/protocol/trainer_protocol.h"
#include "agent/train/kinds.h"
#include "agent/train/lora_sd/lora.h"
#include "agent/train/lora_sd/unet.h"
#include "agent/train/nn/torch_io.h"

namespace gleaner::train {
namespace {

using namespace lora_sd;

struct ForwardArgs {
  std::string config, weights, inputs, lora, grad_weights, out;
};

Status RunForward(const ForwardArgs& a) {
  Result<std::string> text = ReadFile(a.config);
  if (!text.ok()) return text.status();
  Result<Json> j = ParseJson(*text);
  if (!j.ok()) return Status::Invalid(a.config + ": " + j.status().message());
  Result<UNetConfig> cfg = ParseUNetConfig(*j);
  if (!cfg.ok()) return cfg.status();
  Result<TensorMap> weights = LoadWeights(a.weights);
  if (!weights.ok()) return weights.status();
  Result<TensorMap> inputs = LoadSafetensors(a.inputs);
  if (!inputs.ok()) return inputs.status();
  for (const char* k : {"sample", "timestep", "encoder_hidden_states"}) {
    if (!inputs->count(k)) return Status::Invalid(a.inputs + ": missing tensor " + k);
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
    Lora lora;
    if (!a.lora.empty()) {
      Result<Lora> l = Lora::Load(unet, a.lora);
      if (!l.ok()) return l.status();
      lora = std::move(*l);
    }
    torch::Tensor sample = inputs->at("sample").to(torch::kFloat32);
    torch::Tensor ctx = inputs->at("encoder_hidden_states").to(torch::kFloat32);
    torch::Tensor t = inputs->at("timestep");
    std::map<std::string, std::string> meta;
    TensorMap out;
    if (r.defined()) {
      torch::Tensor y = unet.forward(sample, t, ctx);
      if (r.sizes() != y.sizes()) return Status::Invalid("R must have the output's shape");
      torch::Tensor loss = (y * r.to(torch::kFloat32)).sum();
      loss.backward();
      out = lora.PeftGradients();
      out["sample"] = y.detach();
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.9g", loss.item<double>());
      meta["loss_value"] = buf;
    } else {
      torch::NoGradGuard no_grad;
      out["sample"] = unet.forward(sample, t, ctx);
    }
    return SaveSafetensors(a.out, out, meta);
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
                                               : nullptr;
    if (dst == nullptr || i + 1 >= argc) {
      std::fprintf(stderr, "gleaner-train forward: unknown or incomplete argument %s\n", argv[i]);
      return kExitUsage;
    }
    *dst = argv[++i];
  }
  if (a.config.empty() || a.weights.empty() || a.inputs.empty() || a.out.empty()) {
    std::fprintf(stderr,
                 "usage: gleaner-train forward --config C --weights W --inputs I [--lora L] "
                 "[--grad-weights R] --out O\n");
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
  std::string config, out;
  long long seed = 0;
  for (int i = 0; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    if (k == "--config") {
      config = argv[i + 1];
    } else if (k == "--out") {
      out = argv[i + 1];
    } else if (k == "--seed") {
      seed = std::atoll(argv[i + 1]);
    } else {
      out.clear();
      break;
    }
  }
  if (out.empty() || argc % 2 != 0) {
    std::fprintf(stderr,
                 "usage: gleaner-train make-model --out WEIGHTS [--config C] [--seed S]\n"
                 "  (random weights for config C; without C the tiny test config,\n"
                 "   whose config.json is written next to WEIGHTS)\n");
    return kExitUsage;
  }
  Status s = CatchTorch("make-model", [&]() -> Status {
    UNetConfig cfg = TinyConfig();
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
