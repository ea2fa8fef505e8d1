// `gleaner-train vae`: runs the VAE on given inputs and writes its outputs, so any reference
// implementation can be checked against this one.
//
//   gleaner-train vae --config C --weights W --inputs I --out O [--seed S]
//
// I: safetensors with `image` [B,C,H,W] in [-1, 1] and/or `latent` [B,L,h,w] (fed to the decoder
//    as is, without scaling_factor). O: for `image`, `mean`, `logvar`, `std` of the latent
//    distribution (and, with --seed, `sample` = latent_dist.sample(generator seeded S) and
//    `latents` = the scaled training latents); for `latent`, `decoded` (the decoder's float
//    output) and `decoded_u8` (the 8-bit image a pipeline would save).
#include <cstdlib>
#include <string>

#include "agent/train/common/subcommand.h"
#include "agent/train/kinds.h"
#include "agent/train/nn/torch_io.h"
#include "agent/train/vae/image_latents.h"

namespace gleaner::train {
namespace {

using namespace vae;

struct VaeArgs {
  std::string config, weights, inputs, out, seed;
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
      if (!a.seed.empty()) {
        torch::Generator gen = at::detail::createCPUGenerator(seed);
        out["sample"] = d.Sample(gen);
        out["latents"] = ScaleLatents(*cfg, out["sample"]);
      }
    }
    if (latent != inputs->end()) {
      out["decoded"] = model.Decode(latent->second);
      out["decoded_u8"] = DecodedToU8(out["decoded"]);
    }
    return SaveSafetensors(a.out, out);
  });
}

}  // namespace

int VaeMain(int argc, char** argv) {
  VaeArgs a;
  return RunSubcommand(
      "vae", "gleaner-train vae --config C --weights W --inputs I --out O [--seed S]", argc, argv,
      {{"--config", &a.config, true},
       {"--weights", &a.weights, true},
       {"--inputs", &a.inputs, true},
       {"--out", &a.out, true},
       {"--seed", &a.seed, false}},
      [&] { return RunVae(a); });
}

}  // namespace gleaner::train
