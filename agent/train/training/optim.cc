#include "agent/train/training/optim.h"

#include <cmath>

namespace gleaner::train::training {

bool IsKnownLrScheduler(const std::string& name) {
  return name == "constant" || name == "constant_with_warmup" || name == "linear" ||
         name == "cosine";
}

double LrMultiplier(const std::string& name, int64_t step, int64_t warmup, int64_t total) {
  if (name == "constant") return 1.0;
  if (step < warmup) return double(step) / double(std::max<int64_t>(1, warmup));
  if (name == "constant_with_warmup") return 1.0;
  double progress = double(step - warmup) / double(std::max<int64_t>(1, total - warmup));
  if (name == "linear") return std::max(0.0, 1.0 - progress);
  if (name == "cosine") return std::max(0.0, 0.5 * (1.0 + std::cos(M_PI * progress)));
  return 1.0;
}

AdamW::AdamW(std::vector<torch::Tensor> params, AdamWOptions o)
    : params_(std::move(params)), o_(o) {
  for (const auto& p : params_) {
    m_.push_back(torch::zeros_like(p, torch::MemoryFormat::Contiguous));
    v_.push_back(torch::zeros_like(p, torch::MemoryFormat::Contiguous));
  }
}

void AdamW::Step(double lr) {
  torch::NoGradGuard no_grad;
  ++step_;
  double bc1 = 1.0 - std::pow(o_.beta1, double(step_));
  double bc2 = 1.0 - std::pow(o_.beta2, double(step_));
  for (size_t i = 0; i < params_.size(); ++i) {
    torch::Tensor& p = params_[i];
    torch::Tensor g = p.grad();
    if (!g.defined()) continue;
    p.mul_(1.0 - lr * o_.weight_decay);
    m_[i].mul_(o_.beta1).add_(g, 1.0 - o_.beta1);
    v_[i].mul_(o_.beta2).addcmul_(g, g, 1.0 - o_.beta2);
    torch::Tensor denom = (v_[i].sqrt() / std::sqrt(bc2)).add_(o_.eps);
    p.addcdiv_(m_[i], denom, -lr / bc1);
  }
}

TensorMap AdamW::State() const {
  TensorMap out;
  for (size_t i = 0; i < params_.size(); ++i) {
    out["exp_avg." + std::to_string(i)] = m_[i];
    out["exp_avg_sq." + std::to_string(i)] = v_[i];
  }
  out["step"] = torch::tensor(step_, torch::kInt64).reshape({});
  return out;
}

Status AdamW::Restore(const TensorMap& state) {
  if (state.size() != 2 * params_.size() + 1 || !state.count("step")) {
    return Status::Invalid("optimizer state does not match the LoRA parameters");
  }
  return CatchTorch("restoring optimizer", [&]() -> Status {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < params_.size(); ++i) {
      auto m = state.find("exp_avg." + std::to_string(i));
      auto v = state.find("exp_avg_sq." + std::to_string(i));
      if (m == state.end() || v == state.end() || m->second.sizes() != params_[i].sizes() ||
          v->second.sizes() != params_[i].sizes()) {
        return Status::Invalid("optimizer state for parameter " + std::to_string(i) +
                               " is missing or mis-shaped");
      }
      m_[i].copy_(m->second);
      v_[i].copy_(v->second);
    }
    step_ = state.at("step").item<int64_t>();
    return Status::Ok();
  });
}

double ClipGradNorm(const std::vector<torch::Tensor>& params, double max_norm) {
  torch::NoGradGuard no_grad;
  double sq = 0;
  for (const auto& p : params) {
    if (p.grad().defined()) sq += p.grad().to(torch::kFloat64).pow(2).sum().item<double>();
  }
  double norm = std::sqrt(sq);
  if (max_norm > 0 && norm > max_norm) {
    double coef = max_norm / (norm + 1e-6);
    for (const auto& p : params) {
      if (p.grad().defined()) p.grad().mul_(coef);
    }
  }
  return norm;
}

bool LossScaler::UnscaleAndCheck(const std::vector<torch::Tensor>& params) {
  if (!enabled) return true;
  torch::NoGradGuard no_grad;
  bool finite = true;
  for (const auto& p : params) {
    if (!p.grad().defined()) continue;
    p.grad().div_(scale);
    if (!torch::isfinite(p.grad()).all().item<bool>()) finite = false;
  }
  return finite;
}

void LossScaler::Update(bool finite) {
  if (!enabled) return;
  if (!finite) {
    scale *= 0.5;
    growth_tracker = 0;
  } else if (++growth_tracker >= growth_interval) {
    scale *= 2.0;
    growth_tracker = 0;
  }
}

}  // namespace gleaner::train::training
