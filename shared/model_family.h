// The denoiser families a lora-sd job can train. A job's family is read from its base model's
// own files (model_manifest.h ModelFamilyOfFiles: a diffusers folder with transformer/ is FLUX),
// never guessed from names; it decides which params apply (job_params.h). Portable value type.
#pragma once

namespace gleaner {

enum class ModelFamily {
  kSdUnet,  // SD 1.x/2.x/SDXL UNet, DDPM training (ε or v prediction)
  kFlux,    // FLUX.1 flow-matching transformer
};

// "sd-unet" | "flux", as the trainer's LoRA metadata and messages name them.
constexpr const char* ModelFamilyName(ModelFamily family) {
  return family == ModelFamily::kFlux ? "flux" : "sd-unet";
}

}  // namespace gleaner
