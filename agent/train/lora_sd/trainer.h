// The lora-sd training loop: one Trainer owns the UNet, its LoRA, the optimizer and all state a
// checkpoint must carry, so that a resumed run continues bit-identically (on CPU).
//
// Contract: Create validates params (TrainParams::FromJson) and inputs, loads the base weights
// and attaches fresh LoRA (A ~ N(0, 1/r^2), B = 0) from the seed. Step() runs one optimizer step
// (gradient_accumulation micro-batches) and returns its mean loss; a NaN/Inf loss is a
// kInvalidArgument error, never applied. Checkpoints are directories (see docs/training.md):
// lora.safetensors, optimizer.safetensors, rng.safetensors, state.json, then MANIFEST.json last.
// Not thread-safe.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>

#include "agent/train/lora_sd/dataset.h"
#include "agent/train/lora_sd/lora.h"
#include "agent/train/lora_sd/optim.h"
#include "agent/train/lora_sd/unet.h"
#include "shared/json.h"

namespace gleaner::train::lora_sd {

struct TrainParams {
  int64_t steps = 100, batch_size = 1, rank = 4, seed = 0, checkpoint_every = 0;
  int64_t gradient_accumulation = 1, warmup_steps = 0;
  double learning_rate = 1e-4, alpha = 4, prior_loss_weight = 1, snr_gamma = 0;
  double noise_offset = 0, max_grad_norm = 1;
  std::string mixed_precision = "no", lr_scheduler = "constant", prediction_type = "epsilon";
  bool gradient_checkpointing = false;
  AdamWOptions adam;
  // Reads spec.params (defaults for absent fields; `steps` may also come from spec.steps).
  static Result<TrainParams> FromJson(const Json& params, int64_t spec_steps);
  Json ToJson() const;
};

class Trainer {
 public:
  static Result<std::unique_ptr<Trainer>> Create(const UNetConfig& config,
                                                 const TensorMap& base_weights, Dataset data,
                                                 const TrainParams& params);
  Result<double> Step();
  int64_t step() const { return step_; }
  const TrainParams& params() const { return p_; }
  const Lora& lora() const { return lora_; }

  // Writes a checkpoint directory `dir` (via dir + ".tmp", MANIFEST.json last, renamed).
  Status SaveCheckpoint(const std::string& dir, const std::string& job_id);
  // Restores a checkpoint written by SaveCheckpoint (files verified against the manifest).
  Status Restore(const std::string& dir);
  // Writes output/lora.safetensors (kohya), output/lora_peft.safetensors (PEFT), MANIFEST.json.
  Status WriteOutput(const std::string& dir, const std::string& job_id);

 private:
  Trainer(const UNetConfig& c, Dataset d, const TrainParams& p);
  torch::Tensor Loss(const torch::Tensor& latents, const torch::Tensor& text);

  TrainParams p_;
  std::shared_ptr<UNet> unet_;
  Dataset data_;
  Lora lora_;
  std::unique_ptr<AdamW> opt_;
  LossScaler scaler_;
  torch::Generator gen_;
  torch::Tensor alphas_cumprod_;
  torch::Device device_ = torch::kCPU;
  int64_t step_ = 0, samples_seen_ = 0;
};

}  // namespace gleaner::train::lora_sd
