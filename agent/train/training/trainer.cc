#include "agent/train/training/trainer.h"

#include <cmath>
#include <cstdio>
#include <optional>

#include "agent/protocol/checkpoint_dir.h"
#include "agent/protocol/trainer_protocol.h"
#include "agent/train/models/text/text_encoder_lora.h"
#include "agent/train/nn/torch_compat.h"
#include "shared/job_params.h"
#include "shared/sha256.h"

namespace gleaner::train::training {

Trainer::Trainer(Dataset d, const LoraSdParams& p) : p_(p), data_(std::move(d)) {}

Result<std::unique_ptr<Trainer>> Trainer::Create(const models::DenoiserConfig& config,
                                                 const TensorMap& base_weights, Dataset data,
                                                 const LoraSdParams& params, TextTraining text,
                                                 const Json& scheduler_config) {
  std::unique_ptr<Trainer> t;
  Status s = CatchTorch("setting up lora-sd", [&]() -> Status {
    t.reset(new Trainer(std::move(data), params));
    if (torch::cuda::is_available()) t->device_ = torch::Device(torch::kCUDA, 0);
    // The frozen base goes straight to the device in the compute dtype (bf16/fp16 under mixed
    // precision on CUDA): no fp32 copy of it on the device.
    // base_precision "fp8": its Linear weights in float8_e4m3fn, upcast per layer
    // (nn/placement.h).
    BasePlacement placement = PlacementFor(t->device_, params.mixed_precision);
    placement.fp8_linear = params.base_precision == "fp8";
    if (placement.fp8_linear && !kHasFp8) {
      return Status::Invalid("params.base_precision \"fp8\" needs libtorch 2.1 or newer");
    }
    Result<std::shared_ptr<Denoiser>> d = models::BuildDenoiser(config, base_weights, placement);
    if (!d.ok()) return d.status();
    t->denoiser_ = std::move(*d);
    t->denoiser_->SetGradientCheckpointing(params.gradient_checkpointing);
    GLEANER_RETURN_IF_ERROR(t->denoiser_->SetLoraTargets(params.lora_targets));
    Result<std::unique_ptr<Objective>> objective =
        Objective::Create(t->denoiser_->objective(), params, scheduler_config, t->device_);
    if (!objective.ok()) return objective.status();
    t->objective_ = std::move(*objective);
    t->gen_ = at::detail::createCPUGenerator(uint64_t(params.seed));
    Result<DenoiserLora> l =
        DenoiserLora::Attach(*t->denoiser_, params.rank, params.alpha, t->gen_);
    if (!l.ok()) return l.status();
    t->lora_ = std::move(*l);
    AdamWOptions adam;
    adam.beta1 = params.adam_beta1;
    adam.beta2 = params.adam_beta2;
    adam.eps = params.adam_epsilon;
    adam.weight_decay = params.adam_weight_decay;
    t->opt_ = std::make_unique<AdamW>(t->lora_.Parameters(), adam);
    if (!text.encoders.empty()) {
      const bool sdxl = t->denoiser_->shape().time_ids;
      std::vector<torch::Tensor> te_params;
      for (size_t k = 0; k < text.encoders.size(); ++k) {
        text::TextEncoderRole role = !sdxl    ? text::TextEncoderRole::kSd
                                     : k == 0 ? text::TextEncoderRole::kSdxl1
                                              : text::TextEncoderRole::kSdxl2;
        text.encoders[k]->to(t->device_);
        LoraAdapters a = text::TextEncoderLora(*text.encoders[k], role);
        GLEANER_RETURN_IF_ERROR(a.Attach(params.rank, params.alpha, t->gen_));
        for (const torch::Tensor& x : a.Parameters()) te_params.push_back(x);
        t->text_lora_.push_back(std::move(a));
      }
      t->text_encoders_ = std::move(text.encoders);
      t->text_opt_ = std::make_unique<AdamW>(te_params, adam);
      t->text_ids_[0] = std::move(text.instance_ids);
      t->text_ids_[1] = std::move(text.prior_ids);
    }
    t->scaler_.enabled = t->device_.is_cuda() && params.mixed_precision == "fp16";
    t->autocast_ = AutocastDtypeFor(t->device_, params.mixed_precision);
    if (params.mixed_precision != "no" && !t->autocast_) {
      std::fprintf(stderr,
                   "lora-sd: mixed_precision=%s needs CUDA (CPU autocast is bf16 only); "
                   "training in fp32\n",
                   params.mixed_precision.c_str());
    }
    return Status::Ok();
  });
  if (!s.ok()) return s;
  return t;
}

std::vector<torch::Tensor> Trainer::AllParameters() const {
  std::vector<torch::Tensor> all = lora_.Parameters();
  for (const LoraAdapters& a : text_lora_) {
    for (const torch::Tensor& x : a.Parameters()) all.push_back(x);
  }
  return all;
}

TensorMap Trainer::TextLoraTensors(LoraFormat format) const {
  TensorMap out;
  for (const LoraAdapters& a : text_lora_) out.merge(a.Tensors(format));
  return out;
}

void Trainer::EncodeCaptions(const std::vector<torch::Tensor>& ids, Examples* batch) {
  std::vector<torch::Tensor> states;
  for (size_t k = 0; k < text_encoders_.size(); ++k) {
    text::ClipTextOutput out = text_encoders_[k]->forward(ids[k]);
    if (!denoiser_->shape().time_ids) {
      batch->text = out.last_hidden_state;
      return;
    }
    states.push_back(out.penultimate_hidden_state);
    if (out.text_embeds.defined()) batch->pooled = out.text_embeds;
  }
  batch->text = torch::cat(states, -1);
}

torch::Tensor Trainer::Loss(const Examples& batch) {
  // All random draws come from the CPU generator, so CPU and CUDA runs see the same numbers.
  NoisedLatents x = objective_->Noise(batch.latents, gen_);
  torch::Tensor pred;
  {
    // Mixed precision as diffusers: autocast around the forward pass only (bf16 on CPU too).
    std::optional<AutocastScope> autocast;
    if (autocast_) autocast.emplace(device_.type(), *autocast_);
    Conditioning cond{batch.text, batch.pooled, batch.time_ids, torch::Tensor()};
    if (denoiser_->shape().guidance) {
      // FLUX.1-dev's embedded guidance, fixed while training (params.guidance).
      cond.guidance = torch::full({batch.latents.size(0)}, p_.guidance,
                                  torch::TensorOptions().dtype(torch::kFloat32).device(device_));
    }
    pred = denoiser_->Forward(x.noisy, x.timesteps, cond);
  }
  torch::Tensor per = objective_->Loss(pred, x);
  if (!data_.has_prior()) return per.mean();
  int64_t n = batch.latents.size(0) / 2;  // first half instance, second half class examples
  return per.slice(0, 0, n).mean() + p_.prior_loss_weight * per.slice(0, n).mean();
}

Examples Trainer::NextBatch() {
  int64_t n = data_.size();
  std::vector<int64_t> idx, cls;
  for (int64_t i = 0; i < p_.batch_size; ++i, ++samples_seen_) {
    // Data order: a fresh permutation per epoch, derived from (seed, epoch) alone, so the
    // position is just the number of samples seen.
    int64_t epoch = samples_seen_ / n, pos = samples_seen_ % n;
    torch::Generator g =
        at::detail::createCPUGenerator(uint64_t(p_.seed) * 1000003u + uint64_t(epoch) + 1);
    idx.push_back(torch::randperm(n, g, torch::kInt64)[pos].item<int64_t>());
    if (data_.has_prior()) cls.push_back(samples_seen_ % data_.prior.size());
  }
  // Rows `rows` of every tensor of `from`, appended to `to` along the batch dimension.
  auto take = [&](const Examples& from, const std::vector<int64_t>& rows, Examples* to) {
    torch::Tensor ii = torch::tensor(rows, torch::kInt64);
    auto one = [&](const torch::Tensor& src, torch::Tensor* dst) {
      if (!src.defined()) return;
      torch::Tensor part = src.index_select(0, ii);
      *dst = dst->defined() ? torch::cat({*dst, part}, 0) : part;
    };
    one(from.latents, &to->latents);
    one(from.text, &to->text);
    one(from.pooled, &to->pooled);
    one(from.time_ids, &to->time_ids);
  };
  Examples batch;
  take(data_.instance, idx, &batch);
  if (data_.has_prior()) take(data_.prior, cls, &batch);
  for (torch::Tensor* x : {&batch.latents, &batch.text, &batch.pooled, &batch.time_ids}) {
    if (x->defined()) *x = x->to(device_);
  }
  if (!text_encoders_.empty()) {
    // The same rows of the caption ids, encoded now (with gradients for the encoders' LoRA).
    std::vector<torch::Tensor> ids;
    for (size_t k = 0; k < text_encoders_.size(); ++k) {
      torch::Tensor x = text_ids_[0][k].index_select(0, torch::tensor(idx, torch::kInt64));
      if (data_.has_prior()) {
        x = torch::cat({x, text_ids_[1][k].index_select(0, torch::tensor(cls, torch::kInt64))});
      }
      ids.push_back(x.to(device_));
    }
    EncodeCaptions(ids, &batch);
  }
  return batch;
}

Result<double> Trainer::Step() {
  double total = 0;
  Status s = CatchTorch("training step", [&]() -> Status {
    std::vector<torch::Tensor> params = AllParameters();
    for (auto& p : params) p.mutable_grad().reset();
    for (int64_t micro = 0; micro < p_.gradient_accumulation; ++micro) {
      torch::Tensor loss = Loss(NextBatch());
      double v = loss.item<double>();
      if (!std::isfinite(v)) {
        return Status::Invalid("loss is " + std::string(std::isnan(v) ? "NaN" : "Inf") +
                               " at step " + std::to_string(step_ + 1) +
                               " (learning rate too high or bad data)");
      }
      total += v / double(p_.gradient_accumulation);
      (loss * (scaler_.enabled ? scaler_.scale : 1.0) / double(p_.gradient_accumulation))
          .backward();
    }
    bool finite = scaler_.UnscaleAndCheck(params);
    if (finite) {
      ClipGradNorm(params, p_.max_grad_norm);
      double lr =
          p_.learning_rate * LrMultiplier(p_.lr_scheduler, step_, p_.warmup_steps, p_.steps);
      opt_->Step(lr);
      if (text_opt_) {
        text_opt_->Step(p_.text_encoder_lr *
                        LrMultiplier(p_.lr_scheduler, step_, p_.warmup_steps, p_.steps));
      }
    }
    scaler_.Update(finite);
    ++step_;
    return Status::Ok();
  });
  if (!s.ok()) return s;
  return total;
}

namespace {

Status WriteWithManifest(const std::string& dir, const std::map<std::string, std::string>& files,
                         int64_t step, const std::string& job_id, const Json& meta) {
  Result<CheckpointWriter> w = CheckpointWriter::Begin(dir);
  if (!w.ok()) return w.status();
  for (const auto& [name, bytes] : files) GLEANER_RETURN_IF_ERROR(w->AddFile(name, bytes));
  return w->Commit("lora-sd", job_id, step, meta);
}

}  // namespace

Status Trainer::SaveCheckpoint(const std::string& dir, const std::string& job_id,
                               std::map<std::string, std::string>* exported) {
  std::map<std::string, std::string> files;
  Status s = CatchTorch("writing checkpoint", [&]() -> Status {
    std::map<std::string, std::string> meta = {
        {"format", "peft"}, {"rank", std::to_string(p_.rank)}, {"alpha", Json(p_.alpha).dump()}};
    Result<std::string> l = EncodeSafetensors(lora_.PeftTensors(), meta);
    Result<std::string> o = EncodeSafetensors(opt_->State());
    Result<std::string> r = EncodeSafetensors({{"cpu", gen_.get_state()}});
    for (auto* x : {&l, &o, &r}) {
      if (!x->ok()) return x->status();
    }
    files["lora.safetensors"] = std::move(*l);
    files["optimizer.safetensors"] = std::move(*o);
    files["rng.safetensors"] = std::move(*r);
    if (text_opt_) {
      Result<std::string> tl = EncodeSafetensors(TextLoraTensors(LoraFormat::kPeft), meta);
      Result<std::string> to = EncodeSafetensors(text_opt_->State());
      if (!tl.ok()) return tl.status();
      if (!to.ok()) return to.status();
      files["text_encoder_lora.safetensors"] = std::move(*tl);
      files["text_encoder_optimizer.safetensors"] = std::move(*to);
    }
    Json state = {{"step", step_},
                  {"samples_seen", samples_seen_},
                  {"lr_scheduler",
                   {{"name", p_.lr_scheduler},
                    {"step", step_},
                    {"warmup_steps", p_.warmup_steps},
                    {"total_steps", p_.steps},
                    {"base_lr", p_.learning_rate}}},
                  {"loss_scaler",
                   {{"enabled", scaler_.enabled},
                    {"scale", scaler_.scale},
                    {"growth_tracker", scaler_.growth_tracker}}},
                  {"params", p_.ToJson()}};
    files["state.json"] = DumpJson(state);
    return Status::Ok();
  });
  if (!s.ok()) return s;
  Json meta = {{"samples_seen", samples_seen_}};
  if (step_ == p_.steps) {  // the last step's checkpoint records its export (trainer_protocol.h)
    Result<std::map<std::string, std::string>> out = ExportFiles(job_id);
    if (!out.ok()) return out.status();
    meta[kManifestOutputsKey] = FileListToJson(DescribeFiles(*out));
    if (exported != nullptr) *exported = std::move(*out);
  }
  return WriteWithManifest(dir, files, step_, job_id, meta);
}

Status Trainer::Restore(const std::string& dir) {
  Result<CheckpointManifest> m = VerifyCheckpointDir(dir);
  if (!m.ok()) return m.status();
  if (m->kind != "lora-sd") return Status::Invalid("checkpoint is of kind " + m->kind);
  std::map<std::string, std::string> files;
  for (const ManifestFile& f : m->files) {
    Result<std::string> bytes = ReadFile(dir + "/" + f.name);
    if (!bytes.ok()) return bytes.status();
    if (int64_t(bytes->size()) != f.size || Sha256Hex(*bytes) != f.sha256) {
      return Status::Corruption("checkpoint file " + f.name + " does not match its manifest");
    }
    files[f.name] = std::move(*bytes);
  }
  for (const char* need :
       {"lora.safetensors", "optimizer.safetensors", "rng.safetensors", "state.json"}) {
    if (!files.count(need)) return Status::Invalid(std::string("checkpoint lacks ") + need);
  }
  Result<Json> state = ParseJson(files["state.json"]);
  if (!state.ok()) return state.status();
  int64_t step = 0, seen = 0, tracker = 0;
  double scale = 1;
  FieldReader r(*state, "state.");
  r.Int("step", &step, true, 0, p_.steps);
  r.Int("samples_seen", &seen, true, 0, INT64_MAX);
  const Json* ls = nullptr;
  r.Object("loss_scaler", &ls, true);
  if (!r.ok()) return r.status();
  FieldReader rs(*ls, "state.loss_scaler.");
  rs.Number("scale", &scale, true, 1e-30, 1e30);
  rs.Int("growth_tracker", &tracker, true, 0, INT64_MAX);
  if (!rs.ok()) return rs.status();
  const Json& saved = (*state)["params"];
  if (text_opt_) {
    for (const char* need :
         {"text_encoder_lora.safetensors", "text_encoder_optimizer.safetensors"}) {
      if (!files.count(need)) return Status::Invalid(std::string("checkpoint lacks ") + need);
    }
  }
  for (const char* k :
       {"rank", "alpha", "batch_size", "gradient_accumulation", "seed", "train_text_encoder"}) {
    if (!saved.is_object() || saved.value(k, Json()) != p_.ToJson()[k]) {
      return Status::Invalid(std::string("checkpoint was trained with a different ") + k);
    }
  }
  return CatchTorch("restoring checkpoint", [&]() -> Status {
    auto parse = [&](const char* name) { return DecodeSafetensors(files[name], name); };
    Result<TensorMap> lora = parse("lora.safetensors");
    Result<TensorMap> opt = parse("optimizer.safetensors");
    Result<TensorMap> rng = parse("rng.safetensors");
    for (auto* x : {&lora, &opt, &rng}) {
      if (!x->ok()) return x->status();
    }
    GLEANER_RETURN_IF_ERROR(lora_.Assign(*lora));
    GLEANER_RETURN_IF_ERROR(opt_->Restore(*opt));
    if (text_opt_) {
      Result<TensorMap> tl = parse("text_encoder_lora.safetensors");
      Result<TensorMap> to = parse("text_encoder_optimizer.safetensors");
      if (!tl.ok()) return tl.status();
      if (!to.ok()) return to.status();
      // Tensors() are detached views of the adapters: writing them writes the adapters.
      torch::NoGradGuard no_grad;
      TensorMap mine = TextLoraTensors(LoraFormat::kPeft);
      if (mine.size() != tl->size()) {
        return Status::Invalid("checkpoint: text_encoder_lora.safetensors has " +
                               std::to_string(tl->size()) + " tensors, expected " +
                               std::to_string(mine.size()));
      }
      for (auto& [key, x] : mine) {
        auto it = tl->find(key);
        if (it == tl->end() || it->second.sizes() != x.sizes()) {
          return Status::Invalid("checkpoint: missing or mis-shaped text encoder tensor " + key);
        }
        x.copy_(it->second);
      }
      GLEANER_RETURN_IF_ERROR(text_opt_->Restore(*to));
    }
    if (!rng->count("cpu")) return Status::Invalid("checkpoint rng state missing");
    gen_.set_state(rng->at("cpu"));
    step_ = step;
    samples_seen_ = seen;
    scaler_.scale = scale;
    scaler_.growth_tracker = tracker;
    return Status::Ok();
  });
}

Result<std::map<std::string, std::string>> Trainer::ExportFiles(const std::string& job_id) {
  std::map<std::string, std::string> files;
  Status s = CatchTorch("exporting the LoRA", [&]() -> Status {
    std::map<std::string, std::string> meta = {{"ss_network_module", "networks.lora"},
                                               {"ss_network_dim", std::to_string(p_.rank)},
                                               {"ss_network_alpha", Json(p_.alpha).dump()},
                                               {"rank", std::to_string(p_.rank)},
                                               {"alpha", Json(p_.alpha).dump()},
                                               {"steps", std::to_string(step_)},
                                               {"gleaner_params", DumpJson(p_.ToJson())},
                                               {"gleaner_job_id", job_id}};
    // The family's labels for the tools that load the file (SDXL: as sd-scripts writes them).
    for (const auto& [key, value] : denoiser_->LoraFileMetadata()) meta[key] = value;
    TensorMap kohya_tensors = lora_.KohyaTensors(), peft_tensors = lora_.PeftTensors();
    if (text_opt_) {
      kohya_tensors.merge(TextLoraTensors(LoraFormat::kKohya));
      peft_tensors.merge(TextLoraTensors(LoraFormat::kPeft));
      meta["text_encoder_target_modules"] = "q_proj,k_proj,v_proj,out_proj";
    }
    meta["format"] = "kohya";
    Result<std::string> kohya = EncodeSafetensors(kohya_tensors, meta);
    meta["format"] = "peft";
    Result<std::string> peft = EncodeSafetensors(peft_tensors, meta);
    if (!kohya.ok()) return kohya.status();
    if (!peft.ok()) return peft.status();
    files["lora.safetensors"] = std::move(*kohya);
    files["lora_peft.safetensors"] = std::move(*peft);
    return Status::Ok();
  });
  if (!s.ok()) return s;
  return files;
}

Status Trainer::WriteOutput(const std::string& dir, const std::string& job_id,
                            const std::map<std::string, std::string>& files) {
  return WriteWithManifest(dir, files, step_, job_id, Json{{"rank", p_.rank}, {"alpha", p_.alpha}});
}

}  // namespace gleaner::train::training
