// The LoRA training loop of a denoiser: one Trainer owns the denoiser (denoiser/denoiser.h), its
// LoRA, the objective (objective.h), the optimizer and all state a checkpoint must carry, so that
// a resumed run continues bit-identically (on CPU). It knows no network: the denoiser is built
// through models/loader/denoisers.h from its config.
//
// Contract: Create takes validated params (shared/job_params.h) and a dataset validated against
// the denoiser's shape (dataset.h), builds the denoiser on the device with its base weights in
// the compute dtype (nn/placement.h; fp8 Linear weights with params.base_precision "fp8") and
// attaches fresh fp32 LoRA (A ~ N(0, 1/r^2), B = 0) from the seed.
// Step() runs one optimizer step (gradient_accumulation micro-batches) and returns its mean loss; a
// NaN/Inf loss is a kInvalidArgument error, never applied. Checkpoints are directories (see
// docs/training.md): lora.safetensors, optimizer.safetensors, rng.safetensors, state.json, then
// MANIFEST.json last. Not thread-safe.
//
// With TextTraining (params.train_text_encoder), LoRA also goes on q/k/v/out_proj of every layer
// of the text encoder(s) (models/text/text_encoder_lora.h; drawn from the seed after the
// denoiser's), the conditioning is computed from each batch's caption ids inside the step (SD: last
// hidden state; SDXL: both penultimate states and encoder 2's text_embeds), and those adapters
// train with their own AdamW at text_encoder_lr (same schedule; gradients clipped together with the
// denoiser's). Checkpoints then also hold text_encoder_lora.safetensors and
// text_encoder_optimizer.safetensors; the output files add the encoders' adapters (kohya lora_te_ /
// lora_te1_ / lora_te2_, PEFT text_encoder. / text_encoder_2.).
#pragma once

#include <torch/torch.h>

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "agent/train/denoiser/denoiser.h"
#include "agent/train/denoiser/denoiser_lora.h"
#include "agent/train/models/loader/denoisers.h"
#include "agent/train/models/text/clip_text_model.h"
#include "agent/train/training/dataset.h"
#include "agent/train/training/objective.h"
#include "agent/train/training/optim.h"
#include "shared/job_params.h"
#include "shared/json.h"

namespace gleaner::train::training {

// The text encoders to train (SD: one; SDXL: text_encoder, text_encoder_2; frozen base weights,
// shared with the caller) and the caption ids of the examples ([N,T] and [M,T] per encoder).
struct TextTraining {
  std::vector<std::shared_ptr<text::ClipTextModel>> encoders;
  std::vector<torch::Tensor> instance_ids, prior_ids;
};

class Trainer {
 public:
  static Result<std::unique_ptr<Trainer>> Create(const models::DenoiserConfig& config,
                                                 const TensorMap& base_weights, Dataset data,
                                                 const LoraSdParams& params, TextTraining text = {},
                                                 const Json& scheduler_config = Json::object());
  Result<double> Step();
  int64_t step() const { return step_; }
  const LoraSdParams& params() const { return p_; }
  const DenoiserLora& lora() const { return lora_; }
  // The denoiser with its LoRA as trained so far (samples render with it; do not train it
  // elsewhere).
  std::shared_ptr<Denoiser> denoiser() const { return denoiser_; }

  // Writes a checkpoint directory `dir` (via dir + ".tmp", MANIFEST.json last, renamed). At the
  // job's last step its manifest also records the export (ExportFiles) in meta.outputs, and
  // *exported (when given) receives those files, so the output need not be encoded twice.
  Status SaveCheckpoint(const std::string& dir, const std::string& job_id,
                        std::map<std::string, std::string>* exported = nullptr);
  // Restores a checkpoint written by SaveCheckpoint (files verified against the manifest).
  Status Restore(const std::string& dir);
  // The output files of the current weights: lora.safetensors (kohya) and
  // lora_peft.safetensors (PEFT), a function of the checkpointed state only, so the checkpoint
  // of the last step exports to the same bytes on any node (SaveCheckpoint records them there).
  Result<std::map<std::string, std::string>> ExportFiles(const std::string& job_id);
  // Writes `files` (ExportFiles) to `dir` with its MANIFEST.json.
  Status WriteOutput(const std::string& dir, const std::string& job_id,
                     const std::map<std::string, std::string>& files);

 private:
  Trainer(Dataset d, const LoraSdParams& p);
  // Mean loss of one micro-batch (instance examples, then as many class examples if any).
  torch::Tensor Loss(const Examples& batch);
  // The next micro-batch in data order (see docs/training.md), on the device.
  Examples NextBatch();
  // With text-encoder training: batch->text (and pooled) from caption ids [B,T] per encoder.
  void EncodeCaptions(const std::vector<torch::Tensor>& ids, Examples* batch);
  // Every trainable tensor: the denoiser's adapters, then the text encoders'.
  std::vector<torch::Tensor> AllParameters() const;
  TensorMap TextLoraTensors(LoraFormat format) const;

  LoraSdParams p_;
  std::shared_ptr<Denoiser> denoiser_;
  Dataset data_;
  DenoiserLora lora_;
  std::unique_ptr<Objective> objective_;
  std::unique_ptr<AdamW> opt_;
  std::vector<std::shared_ptr<text::ClipTextModel>> text_encoders_;  // empty: not trained
  std::vector<LoraAdapters> text_lora_;
  std::unique_ptr<AdamW> text_opt_;
  std::vector<torch::Tensor> text_ids_[2];  // instance, prior: [N,T] per encoder
  LossScaler scaler_;
  torch::Generator gen_;
  torch::Device device_ = torch::kCPU;
  std::optional<torch::Dtype> autocast_;  // the forward pass's autocast dtype; none: fp32
  int64_t step_ = 0, samples_seen_ = 0;
};

}  // namespace gleaner::train::training
