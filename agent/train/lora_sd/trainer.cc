#include "agent/train/lora_sd/trainer.h"

#include <ATen/autocast_mode.h>

#include <cmath>
#include <cstdio>

#include "agent/protocol/checkpoint_dir.h"
#include "agent/protocol/trainer_protocol.h"
#include "shared/job_params.h"
#include "shared/sha256.h"

namespace gleaner::train::lora_sd {

Result<TrainParams> TrainParams::FromJson(const Json& raw, int64_t spec_steps) {
  TrainParams p;
  if (!raw.is_object()) return Status::Invalid("params must be a JSON object");
  Json in = raw;
  if (!in.contains("steps") && spec_steps > 0) in["steps"] = spec_steps;
  // The coordinator stores normalised params; normalising again is idempotent and keeps the
  // defaults and ranges in one place (shared/job_params.h).
  Result<Json> params = NormalizeParams("lora-sd", in);
  if (!params.ok()) return params.status();
  FieldReader r(*params, "params.");
  r.Int("steps", &p.steps, false, 1, 10000000);
  r.Int("batch_size", &p.batch_size, false, 1, 1024);
  r.Number("learning_rate", &p.learning_rate, false, 1e-12, 1);
  r.Int("rank", &p.rank, false, 1, 1024);
  r.Number("alpha", &p.alpha, false, 1e-6, 1e6);
  r.Int("seed", &p.seed, false, 0, kMaxSafeInteger);
  r.Int("checkpoint_every", &p.checkpoint_every, false, 0, 10000000);
  r.String("mixed_precision", &p.mixed_precision, false, 16);
  r.Bool("gradient_checkpointing", &p.gradient_checkpointing, false);
  r.Int("gradient_accumulation", &p.gradient_accumulation, false, 1, 1024);
  r.String("lr_scheduler", &p.lr_scheduler, false, 32);
  r.Int("warmup_steps", &p.warmup_steps, false, 0, 10000000);
  r.String("prediction_type", &p.prediction_type, false, 32);
  r.Number("prior_loss_weight", &p.prior_loss_weight, false, 0, 1000);
  r.Number("snr_gamma", &p.snr_gamma, false, 0, 1000);
  r.Number("noise_offset", &p.noise_offset, false, 0, 1);
  r.Number("max_grad_norm", &p.max_grad_norm, false, 0, 1e6);
  r.Number("adam_beta1", &p.adam.beta1, false, 0, 0.999999);
  r.Number("adam_beta2", &p.adam.beta2, false, 0, 0.999999999);
  r.Number("adam_weight_decay", &p.adam.weight_decay, false, 0, 10);
  r.Number("adam_epsilon", &p.adam.eps, false, 1e-20, 1);
  if (!r.ok()) return r.status();
  if (p.mixed_precision != "no" && p.mixed_precision != "fp16" && p.mixed_precision != "bf16") {
    return Status::Invalid("params.mixed_precision must be one of no, fp16, bf16");
  }
  if (!IsKnownLrScheduler(p.lr_scheduler)) {
    return Status::Invalid(
        "params.lr_scheduler must be one of constant, constant_with_warmup, linear, cosine");
  }
  if (p.prediction_type != "epsilon" && p.prediction_type != "v_prediction") {
    return Status::Invalid("params.prediction_type must be epsilon or v_prediction");
  }
  return p;
}

Json TrainParams::ToJson() const {
  return Json{{"steps", steps},
              {"batch_size", batch_size},
              {"learning_rate", learning_rate},
              {"rank", rank},
              {"alpha", alpha},
              {"seed", seed},
              {"checkpoint_every", checkpoint_every},
              {"mixed_precision", mixed_precision},
              {"gradient_checkpointing", gradient_checkpointing},
              {"gradient_accumulation", gradient_accumulation},
              {"lr_scheduler", lr_scheduler},
              {"warmup_steps", warmup_steps},
              {"prediction_type", prediction_type},
              {"prior_loss_weight", prior_loss_weight},
              {"snr_gamma", snr_gamma},
              {"noise_offset", noise_offset},
              {"max_grad_norm", max_grad_norm},
              {"adam_beta1", adam.beta1},
              {"adam_beta2", adam.beta2},
              {"adam_weight_decay", adam.weight_decay},
              {"adam_epsilon", adam.eps}};
}

Trainer::Trainer(const UNetConfig& c, Dataset d, const TrainParams& p)
    : p_(p), unet_(std::make_shared<UNet>(c)), data_(std::move(d)) {}

Result<std::unique_ptr<Trainer>> Trainer::Create(const UNetConfig& config,
                                                 const TensorMap& base_weights, Dataset data,
                                                 const TrainParams& params) {
  std::unique_ptr<Trainer> t;
  Status s = CatchTorch("setting up lora-sd", [&]() -> Status {
    t.reset(new Trainer(config, std::move(data), params));
    GLEANER_RETURN_IF_ERROR(LoadStateDict(*t->unet_, base_weights));
    if (torch::cuda::is_available()) t->device_ = torch::Device(torch::kCUDA, 0);
    t->unet_->to(t->device_);
    t->unet_->set_gradient_checkpointing(params.gradient_checkpointing);
    t->gen_ = at::detail::createCPUGenerator(uint64_t(params.seed));
    Result<Lora> l = Lora::Attach(*t->unet_, params.rank, params.alpha, t->gen_);
    if (!l.ok()) return l.status();
    t->lora_ = std::move(*l);
    t->opt_ = std::make_unique<AdamW>(t->lora_.Parameters(), params.adam);
    t->scaler_.enabled = t->device_.is_cuda() && params.mixed_precision == "fp16";
    t->alphas_cumprod_ = ScaledLinearAlphasCumprod().to(t->device_);
    if (params.mixed_precision != "no" && !t->device_.is_cuda()) {
      std::fprintf(stderr, "lora-sd: mixed_precision=%s needs CUDA; training in fp32\n",
                   params.mixed_precision.c_str());
    }
    return Status::Ok();
  });
  if (!s.ok()) return s;
  return t;
}

torch::Tensor Trainer::Loss(const torch::Tensor& lat, const torch::Tensor& text) {
  int64_t b = lat.size(0);
  auto f32 = torch::TensorOptions().dtype(torch::kFloat32);
  // All random draws come from the CPU generator, so CPU and CUDA runs see the same numbers.
  torch::Tensor noise = torch::randn(lat.sizes(), gen_, f32);
  if (p_.noise_offset > 0) {
    noise = noise + p_.noise_offset * torch::randn({b, lat.size(1), 1, 1}, gen_, f32);
  }
  torch::Tensor t = torch::randint(0, alphas_cumprod_.size(0), {b}, gen_,
                                   torch::TensorOptions().dtype(torch::kInt64));
  noise = noise.to(device_);
  t = t.to(device_);
  torch::Tensor ac = alphas_cumprod_.index_select(0, t).view({b, 1, 1, 1});
  torch::Tensor sa = ac.sqrt(), so = (1.0 - ac).sqrt();
  torch::Tensor noisy = sa * lat + so * noise;
  torch::Tensor target = p_.prediction_type == "epsilon" ? noise : sa * noise - so * lat;
  torch::Tensor pred;
  bool autocast = device_.is_cuda() && p_.mixed_precision != "no";
  if (autocast) {
    at::autocast::set_enabled(true);
    at::autocast::set_autocast_gpu_dtype(p_.mixed_precision == "bf16" ? torch::kBFloat16
                                                                      : torch::kFloat16);
  }
  pred = unet_->forward(noisy, t, text);
  if (autocast) {
    at::autocast::set_enabled(false);
    at::autocast::clear_cache();
  }
  torch::Tensor per = (pred.to(torch::kFloat32) - target).pow(2).mean({1, 2, 3});
  if (p_.snr_gamma > 0) {
    torch::Tensor snr = (ac / (1.0 - ac)).view({b});
    torch::Tensor w = torch::clamp_max(snr, p_.snr_gamma);
    w = p_.prediction_type == "epsilon" ? w / snr : w / (snr + 1.0);
    per = per * w;
  }
  if (!data_.has_prior()) return per.mean();
  int64_t n = b / 2;  // first half instance, second half class examples
  return per.slice(0, 0, n).mean() + p_.prior_loss_weight * per.slice(0, n).mean();
}

Result<double> Trainer::Step() {
  double total = 0;
  Status s = CatchTorch("training step", [&]() -> Status {
    std::vector<torch::Tensor> params = lora_.Parameters();
    for (auto& p : params) p.mutable_grad().reset();
    int64_t n = data_.size();
    for (int64_t micro = 0; micro < p_.gradient_accumulation; ++micro) {
      std::vector<int64_t> idx, cls;
      for (int64_t i = 0; i < p_.batch_size; ++i, ++samples_seen_) {
        // Data order: a fresh permutation per epoch, derived from (seed, epoch) alone, so the
        // position is just the number of samples seen.
        int64_t epoch = samples_seen_ / n, pos = samples_seen_ % n;
        torch::Generator g =
            at::detail::createCPUGenerator(uint64_t(p_.seed) * 1000003u + uint64_t(epoch) + 1);
        idx.push_back(torch::randperm(n, g, torch::kInt64)[pos].item<int64_t>());
        if (data_.has_prior()) cls.push_back(samples_seen_ % data_.class_latents.size(0));
      }
      torch::Tensor ii = torch::tensor(idx, torch::kInt64);
      torch::Tensor lat = data_.latents.index_select(0, ii);
      torch::Tensor txt = data_.text.index_select(0, ii);
      if (data_.has_prior()) {
        torch::Tensor ci = torch::tensor(cls, torch::kInt64);
        torch::Tensor cl = data_.class_latents.index_select(0, ci);
        torch::Tensor ct = data_.class_text.index_select(0, ci);
        if (ct.size(1) != txt.size(1)) {
          return Status::Invalid(
              "class_text_embeddings must have as many tokens as "
              "text_embeddings");
        }
        lat = torch::cat({lat, cl}, 0);
        txt = torch::cat({txt, ct}, 0);
      }
      torch::Tensor loss = Loss(lat.to(device_), txt.to(device_));
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

Status Trainer::SaveCheckpoint(const std::string& dir, const std::string& job_id) {
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
  return WriteWithManifest(dir, files, step_, job_id, Json{{"samples_seen", samples_seen_}});
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
  for (const char* k : {"rank", "alpha", "batch_size", "gradient_accumulation", "seed"}) {
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
    if (!rng->count("cpu")) return Status::Invalid("checkpoint rng state missing");
    gen_.set_state(rng->at("cpu"));
    step_ = step;
    samples_seen_ = seen;
    scaler_.scale = scale;
    scaler_.growth_tracker = tracker;
    return Status::Ok();
  });
}

Status Trainer::WriteOutput(const std::string& dir, const std::string& job_id) {
  std::map<std::string, std::string> files;
  Status s = CatchTorch("writing output", [&]() -> Status {
    std::map<std::string, std::string> meta = {{"ss_network_module", "networks.lora"},
                                               {"ss_network_dim", std::to_string(p_.rank)},
                                               {"ss_network_alpha", Json(p_.alpha).dump()},
                                               {"rank", std::to_string(p_.rank)},
                                               {"alpha", Json(p_.alpha).dump()},
                                               {"target_modules", "to_q,to_k,to_v,to_out.0"},
                                               {"steps", std::to_string(step_)},
                                               {"gleaner_params", DumpJson(p_.ToJson())},
                                               {"gleaner_job_id", job_id}};
    meta["format"] = "kohya";
    Result<std::string> kohya = EncodeSafetensors(lora_.KohyaTensors(), meta);
    meta["format"] = "peft";
    Result<std::string> peft = EncodeSafetensors(lora_.PeftTensors(), meta);
    if (!kohya.ok()) return kohya.status();
    if (!peft.ok()) return peft.status();
    files["lora.safetensors"] = std::move(*kohya);
    files["lora_peft.safetensors"] = std::move(*peft);
    return Status::Ok();
  });
  if (!s.ok()) return s;
  return WriteWithManifest(dir, files, step_, job_id, Json{{"rank", p_.rank}, {"alpha", p_.alpha}});
}

}  // namespace gleaner::train::lora_sd
