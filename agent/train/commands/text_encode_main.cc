// `gleaner-train text-encode`: runs a text encoder (CLIP, or T5 when the config says model_type
// t5 / T5EncoderModel) once on given token ids and writes its outputs (and, for CLIP, LoRA
// gradients), so any reference implementation can be checked against this one.
//
//   gleaner-train text-encode --config C --weights W --inputs I [--lora L] [--grad-weights R] --out
//   O
//
// I: safetensors with `input_ids` [B,T]. L: a PEFT or kohya LoRA file (text-encoder keys; keys of
// other components such as the UNet are ignored). R: safetensors with tensor `R` (or exactly one
// tensor) shaped like penultimate_hidden_state; needs --lora.
// O: last_hidden_state, penultimate_hidden_state, pooler_output, text_embeds (projection models)
//    and, with R, the gradients of sum(penultimate_hidden_state * R) under L's key names
//    (metadata loss_value).
// T5 (FLUX.1's text_encoder_2): O holds last_hidden_state, fp32; --lora and --grad-weights are
// CLIP-only.
#include <cstdio>
#include <map>
#include <set>
#include <string>

#include "agent/protocol/trainer_protocol.h"
#include "agent/train/commands/commands.h"
#include "agent/train/common/command_flags.h"
#include "agent/train/models/text/t5_encoder.h"
#include "agent/train/models/text/text_encoder_lora.h"
#include "shared/native/files.h"

namespace gleaner::train {
namespace {

using namespace text;

constexpr const char* kUsage =
    "usage: gleaner-train text-encode --config C --weights W --inputs I [--lora L] "
    "[--grad-weights R] --out O";

Result<torch::Tensor> LoadGradWeights(const std::string& path) {
  Result<TensorMap> file = LoadSafetensors(path);
  if (!file.ok()) return file.status();
  if (file->count("R")) return file->at("R");
  if (file->size() == 1) return file->begin()->second;
  return Status::Invalid(path + ": expected a tensor named R");
}

// Attaches the text-encoder adapters of a LoRA file; returns the naming it used.
Result<LoraFormat> AttachLora(const std::string& path, ClipTextModel& model,
                              LoraAdapters* adapters) {
  std::map<std::string, std::string> meta;
  Result<TensorMap> file = LoadSafetensors(path, &meta);
  if (!file.ok()) return file.status();
  Result<TextEncoderRole> role = TextEncoderRoleIn(*file, model.config().with_projection);
  if (!role.ok()) return Status::Invalid(path + ": " + role.status().message());
  *adapters = TextEncoderLora(model, *role);
  std::set<std::string> used;
  Status s = adapters->Read(*file, meta, &used);
  if (!s.ok()) return Status::Invalid(path + ": " + s.message());
  for (const auto& [key, value] : *file) {
    if (!used.count(key) && !IsKnownLoraKey(key)) {
      return Status::Invalid(path + ": LoRA: unexpected key " + key);
    }
  }
  return adapters->FormatIn(*file);
}

// The ids tensor of an inputs file, or why not.
Result<torch::Tensor> LoadInputIds(const std::string& path) {
  Result<TensorMap> inputs = LoadSafetensors(path);
  if (!inputs.ok()) return inputs.status();
  if (!inputs->count("input_ids")) return Status::Invalid(path + ": missing tensor input_ids");
  return inputs->at("input_ids");
}

// True when the config file parses and describes a T5 encoder; anything else (CLIP, or a file
// that does not read) takes the CLIP path, whose loader reports it.
bool IsT5ConfigFile(const std::string& path) {
  Result<std::string> text = files::ReadAll(path, 1 << 20);
  if (!text.ok()) return false;
  Result<Json> j = ParseJson(*text);
  return j.ok() && IsT5Config(*j);
}

Status RunT5Encode(const CommandFlags& flags) {
  for (const char* flag : {"--lora", "--grad-weights"}) {
    if (flags.count(flag))
      return Status::Invalid(std::string(flag) + " is for CLIP text encoders, not T5");
  }
  Result<std::shared_ptr<T5Encoder>> model =
      LoadT5Encoder(flags.at("--config"), flags.at("--weights"));
  if (!model.ok()) return model.status();
  Result<torch::Tensor> ids = LoadInputIds(flags.at("--inputs"));
  if (!ids.ok()) return ids.status();
  Status checked = CheckT5InputIds((*model)->config(), *ids);
  if (!checked.ok()) return Status::Invalid(flags.at("--inputs") + ": " + checked.message());
  return CatchTorch("text-encode", [&]() -> Status {
    torch::NoGradGuard no_grad;
    torch::Tensor y = (*model)->forward(*ids);
    return SaveSafetensors(flags.at("--out"), {{"last_hidden_state", y.to(torch::kFloat32)}});
  });
}

Status RunTextEncode(const CommandFlags& flags) {
  if (IsT5ConfigFile(flags.at("--config"))) return RunT5Encode(flags);
  const std::string lora_path = FlagOr(flags, "--lora"), r_path = FlagOr(flags, "--grad-weights");
  if (!r_path.empty() && lora_path.empty()) return Status::Invalid("--grad-weights needs --lora");
  Result<std::shared_ptr<ClipTextModel>> model =
      LoadClipTextModel(flags.at("--config"), flags.at("--weights"));
  if (!model.ok()) return model.status();
  const ClipTextConfig& config = (*model)->config();
  Result<torch::Tensor> input_ids = LoadInputIds(flags.at("--inputs"));
  if (!input_ids.ok()) return input_ids.status();
  const torch::Tensor ids = *input_ids;
  Status checked = CheckInputIds(config, ids);
  if (!checked.ok()) return Status::Invalid(flags.at("--inputs") + ": " + checked.message());
  torch::Tensor r;
  if (!r_path.empty()) {
    Result<torch::Tensor> rr = LoadGradWeights(r_path);
    if (!rr.ok()) return rr.status();
    r = *rr;
  }
  LoraAdapters adapters;
  LoraFormat format = LoraFormat::kPeft;
  if (!lora_path.empty()) {
    Result<LoraFormat> f = AttachLora(lora_path, **model, &adapters);
    if (!f.ok()) return f.status();
    format = *f;
  }
  return CatchTorch("text-encode", [&]() -> Status {
    TensorMap out;
    std::map<std::string, std::string> meta;
    ClipTextOutput y;
    if (r.defined()) {
      y = (*model)->forward(ids);
      if (r.sizes() != y.penultimate_hidden_state.sizes()) {
        return Status::Invalid(r_path + ": R must have penultimate_hidden_state's shape " +
                               torch::str(y.penultimate_hidden_state.sizes()));
      }
      torch::Tensor loss = (y.penultimate_hidden_state * r.to(torch::kFloat32)).sum();
      loss.backward();
      out = adapters.Gradients(format);
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.9g", loss.item<double>());
      meta["loss_value"] = buf;
    } else {
      torch::NoGradGuard no_grad;
      y = (*model)->forward(ids);
    }
    out["last_hidden_state"] = y.last_hidden_state.detach();
    out["penultimate_hidden_state"] = y.penultimate_hidden_state.detach();
    out["pooler_output"] = y.pooler_output.detach();
    if (y.text_embeds.defined()) out["text_embeds"] = y.text_embeds.detach();
    return SaveSafetensors(flags.at("--out"), out, meta);
  });
}

}  // namespace

int TextEncodeMain(int argc, char** argv) {
  Result<CommandFlags> flags = ParseCommandFlags(
      argc, argv, {"--config", "--weights", "--inputs", "--out"}, {"--lora", "--grad-weights"});
  if (!flags.ok()) {
    std::fprintf(stderr, "gleaner-train text-encode: %s\n%s\n", flags.status().message().c_str(),
                 kUsage);
    return kExitUsage;
  }
  Status s = RunTextEncode(*flags);
  if (!s.ok()) {
    std::fprintf(stderr, "gleaner-train text-encode: %s\n", s.ToString().c_str());
    return kExitFailed;
  }
  return 0;
}

}  // namespace gleaner::train
