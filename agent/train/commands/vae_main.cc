// `gleaner-train vae`: runs the VAE on given inputs and writes its outputs, so any reference
// implementation can be checked against this one.
//
//   gleaner-train vae --config C --weights W --inputs I --out O [--seed S] [--png DIR]
//
// I: safetensors with `image` [B,C,H,W] in [-1, 1] and/or `latent` [B,L,h,w]. O: for `image`,
//    `mean`, `logvar`, `std` of the latent distribution, `scaled_mean` = (mean − shift_factor) ·
//    scaling_factor (the training latents without noise) and `decoded_mean` = decode(mean) (and,
//    with --seed, `sample` = latent_dist.sample(generator seeded S) and `latents` = the scaled
//    training latents); for `latent`, `decoded` (the decoder's float output for `latent` fed as
//    is), `decoded_scaled` = decode(latent / scaling_factor + shift_factor) (what sampling does
//    with a pipeline latent) and `decoded_u8` (the 8-bit image of `decoded`); with --png, also
//    DIR/<i>.png of decoded_u8 (3 output channels only).
#include <cstdio>
#include <cstdlib>
#include <string>

#include "agent/protocol/trainer_protocol.h"
#include "agent/train/commands/commands.h"
#include "agent/train/common/command_flags.h"
#include "agent/train/models/vae/image_latents.h"
#include "agent/train/nn/torch_io.h"
#include "shared/native/files.h"

namespace gleaner::train {
namespace {

using namespace vae;

constexpr const char* kUsage =
    "usage: gleaner-train vae --config C --weights W --inputs I --out O [--seed S] [--png DIR]";

struct VaeArgs {
  std::string config, weights, inputs, out, seed, png;
};

Status RunVae(const VaeArgs& a) {
  Result<VaeConfig> cfg = LoadVaeConfig(a.config);
  if (!cfg.ok()) return cfg.status();
  Result<TensorMap> weights = LoadWeights(a.weights);
  if (!weights.ok()) return weights.status();
  Result<TensorMap> inputs = LoadSafetensors(a.inputs);
  if (!inputs.ok()) return inputs.status();
  auto image = inputs->find("image"), latent = inputs->find("latent");
  if (image == inputs->end() && latent == inputs->end()) {
    return Status::Invalid(a.inputs + ": needs a tensor `image` or `latent`");
  }
  if (image != inputs->end()) GLEANER_RETURN_IF_ERROR(CheckImages(*cfg, image->second));
  if (latent != inputs->end()) GLEANER_RETURN_IF_ERROR(CheckLatents(*cfg, latent->second));
  if (!a.png.empty() && (latent == inputs->end() || cfg->out_channels != 3)) {
    return Status::Invalid("--png needs a tensor `latent` and a VAE with 3 output channels");
  }
  char* end = nullptr;
  unsigned long long seed = std::strtoull(a.seed.c_str(), &end, 10);
  if (!a.seed.empty() && *end != '\0') return Status::Invalid("--seed must be an integer");
  return CatchTorch("vae", [&]() -> Status {
    AutoencoderKL model(*cfg);
    GLEANER_RETURN_IF_ERROR(LoadVaeWeights(model, *weights));
    model.eval();
    TensorMap out;
    if (image != inputs->end()) {
      LatentDist d = model.Encode(image->second);
      out["mean"] = d.mean;
      out["logvar"] = d.logvar;
      out["std"] = d.std;
      out["scaled_mean"] = ScaleLatents(*cfg, d.mean);
      out["decoded_mean"] = model.Decode(d.mean);
      if (!a.seed.empty()) {
        torch::Generator gen = at::detail::createCPUGenerator(seed);
        out["sample"] = d.Sample(gen);
        out["latents"] = ScaleLatents(*cfg, out["sample"]);
      }
    }
    if (latent != inputs->end()) {
      out["decoded"] = model.Decode(latent->second);
      out["decoded_scaled"] = model.Decode(UnscaleLatents(*cfg, latent->second));
      out["decoded_u8"] = DecodedToU8(out["decoded"]);
    }
    if (!a.png.empty()) {
      Result<std::vector<std::string>> pngs = EncodePngs(out["decoded_u8"]);
      if (!pngs.ok()) return pngs.status();
      GLEANER_RETURN_IF_ERROR(files::MakeDirs(a.png));
      for (size_t i = 0; i < pngs->size(); ++i) {
        GLEANER_RETURN_IF_ERROR(
            files::WriteDurable(a.png + "/" + std::to_string(i) + ".png", (*pngs)[i]));
      }
    }
    return SaveSafetensors(a.out, out);
  });
}

}  // namespace

int VaeMain(int argc, char** argv) {
  Result<CommandFlags> flags = ParseCommandFlags(
      argc, argv, {"--config", "--weights", "--inputs", "--out"}, {"--seed", "--png"});
  if (!flags.ok()) {
    std::fprintf(stderr, "gleaner-train vae: %s\n%s\n", flags.status().message().c_str(), kUsage);
    return kExitUsage;
  }
  VaeArgs a{flags->at("--config"), flags->at("--weights"),   flags->at("--inputs"),
            flags->at("--out"),    FlagOr(*flags, "--seed"), FlagOr(*flags, "--png")};
  Status s = RunVae(a);
  if (!s.ok()) {
    std::fprintf(stderr, "gleaner-train vae: %s\n", s.ToString().c_str());
    return kExitFailed;
  }
  return 0;
}

}  // namespace gleaner::train
