// A job's sample set (agent/protocol/sample_set.h) rendered by the text-to-image pipeline with
// the model as it is now: the part of a trainer's run loop that turns sample params into
// samples/<step>/<i>.png.
//
//   image i = RenderImage(prompt i, negative i, sample_steps, guidance_scale,
//                         seed = sample_seed + i, sample_resolution x sample_resolution)
//
// Contract: WriteTrainingSamples renders every image, writes the set durably (WriteSampleSet)
// and announces it (EmitSamples, with the wall time spent rendering). `stop` is asked before
// every denoiser call; when it says true nothing is published and *stopped is set (a trainer calls
// this only after the step's checkpoint is durable, so a stop costs no training). Same model,
// same set, same device: the same bytes. Not thread-safe.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "agent/protocol/sample_set.h"
#include "agent/train/models/loader/diffusers_model.h"
#include "agent/train/sampling/text_to_image.h"

namespace gleaner::train::training {

using sampling::ImageRequest;
using sampling::TextToImageModel;

// The request for image i of a set (set.prompts[i]).
ImageRequest SampleRequest(const SampleSet& set, int i);

// What a job renders: its sample set, how often, and the pipeline.
struct JobSamples {
  SampleSet set;
  int64_t every = 0;  // sample_every
  TextToImageModel model;
};

// The samples a job's params (LoraSdParams::samples, normalised) ask for, rendered by the
// trainer's `denoiser` with the text encoders, VAE and scheduler of `model`: nullopt when the
// params ask for none; InvalidArgument when they ask for samples and there is no diffusers model
// (`model` null), or the model cannot render.
Result<std::optional<JobSamples>> JobSamplesFor(const Json& sample_params,
                                                const models::DiffusersModel* model,
                                                std::shared_ptr<Denoiser> denoiser);

Status WriteTrainingSamples(const TextToImageModel& model, SampleSet set, int64_t step,
                            const std::string& work_dir, const std::string& kind,
                            const std::string& job_id, const std::function<bool()>& stop,
                            bool* stopped);

}  // namespace gleaner::train::training
