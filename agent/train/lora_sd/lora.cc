#include "agent/train/lora_sd/lora.h"

#include <cmath>
#include <cstdlib>
#include <set>

#include "agent/train/lora_sd/ldm_names.h"

namespace gleaner::train::lora_sd {
namespace {

std::string KohyaKey(const std::string& path) {
  std::string s = "lora_unet_" + path;
  for (char& c : s) {
    if (c == '.') c = '_';
  }
  return s;
}

// The kohya prefix of `module` with its diffusers path or with its LDM path ("" if unmapped).
std::string KohyaWith(const std::vector<ModulePathPair>& table, bool ldm,
                      const std::string& module) {
  if (!ldm) return KohyaKey(module);
  std::string path = DiffusersToLdm(table, module);
  return path.empty() ? "" : KohyaKey(path);
}

}  // namespace

std::string Lora::KohyaPrefix(const UNetConfig& c, const std::string& module) {
  return KohyaWith(LdmModuleTable(c), c.has_text_time(), module);
}

void Lora::SetTargets(UNet& unet) {
  targets_ = unet.LoraTargets();
  std::vector<ModulePathPair> table = LdmModuleTable(unet.config());
  kohya_.clear();
  for (const auto& [name, m] : targets_) {
    kohya_.push_back(KohyaWith(table, unet.config().has_text_time(), name));
  }
}

Result<Lora> Lora::Attach(UNet& unet, int64_t rank, double alpha, torch::Generator gen) {
  if (rank < 1 || rank > 1024) return Status::Invalid("rank must be in [1, 1024]");
  Lora l;
  l.SetTargets(unet);
  l.rank_ = rank;
  l.alpha_ = alpha;
  Status s = CatchTorch("attaching LoRA", [&]() -> Status {
    for (auto& [name, m] : l.targets_) {
      torch::Tensor a = torch::randn({rank, m->in_features}, gen, torch::kFloat32) / double(rank);
      m->lora_a = a.to(m->weight.device()).requires_grad_(true);
      m->lora_b = torch::zeros({m->out_features, rank}, m->weight.options().dtype(torch::kFloat32))
                      .requires_grad_(true);
      m->lora_scale = alpha / double(rank);
    }
    return Status::Ok();
  });
  if (!s.ok()) return s;
  return l;
}

Result<Lora> Lora::FromPeft(UNet& unet, const TensorMap& tensors, int64_t rank, double alpha) {
  Lora l;
  l.SetTargets(unet);
  l.rank_ = rank;
  l.alpha_ = alpha;
  std::set<std::string> used;
  for (auto& [name, m] : l.targets_) {
    std::string pa = PeftPrefix(name) + ".lora_A.weight", pb = PeftPrefix(name) + ".lora_B.weight";
    auto a = tensors.find(pa), b = tensors.find(pb);
    if (a == tensors.end()) return Status::Invalid("LoRA: missing key " + pa);
    if (b == tensors.end()) return Status::Invalid("LoRA: missing key " + pb);
    if (a->second.sizes() != torch::IntArrayRef({rank, m->in_features}) ||
        b->second.sizes() != torch::IntArrayRef({m->out_features, rank})) {
      return Status::Invalid("LoRA: wrong shape for " + PeftPrefix(name));
    }
    Status s = CatchTorch("loading LoRA", [&]() -> Status {
      m->lora_a = a->second.to(m->weight.device(), torch::kFloat32).clone().requires_grad_(true);
      m->lora_b = b->second.to(m->weight.device(), torch::kFloat32).clone().requires_grad_(true);
      m->lora_scale = alpha / double(rank);
      return Status::Ok();
    });
    if (!s.ok()) return s;
    used.insert(pa);
    used.insert(pb);
  }
  for (const auto& [k, v] : tensors) {
    if (!used.count(k)) return Status::Invalid("LoRA: unexpected key " + k);
  }
  return l;
}

Result<Lora> Lora::Load(UNet& unet, const std::string& path) {
  std::map<std::string, std::string> meta;
  Result<TensorMap> file = LoadSafetensors(path, &meta);
  if (!file.ok()) return file.status();
  bool kohya = false;
  for (const auto& [k, v] : *file) {
    if (k.rfind("lora_unet_", 0) == 0) kohya = true;
  }
  if (!kohya) {
    // PEFT: rank from the first A, alpha from metadata (default alpha = rank, scale 1).
    int64_t rank = 0;
    for (const auto& [k, v] : *file) {
      if (k.size() > 14 && k.compare(k.size() - 14, 14, ".lora_A.weight") == 0 && v.dim() == 2) {
        rank = v.size(0);
        break;
      }
    }
    if (rank == 0) return Status::Invalid(path + ": no LoRA tensors found");
    double alpha = double(rank);
    auto it = meta.find("alpha");
    if (it != meta.end()) {
      char* end = nullptr;
      alpha = std::strtod(it->second.c_str(), &end);
      if (end == it->second.c_str() || !std::isfinite(alpha)) {
        return Status::Invalid(path + ": bad alpha metadata");
      }
    }
    return FromPeft(unet, *file, rank, alpha);
  }
  // kohya: map back through the known targets (the '_' naming is not reversible by itself).
  // Either path flavour is accepted: diffusers module paths or LDM ones.
  TensorMap peft;
  std::set<std::string> used;
  int64_t rank = 0;
  double alpha = 0;
  bool have_alpha = false;
  std::vector<ModulePathPair> table = LdmModuleTable(unet.config());
  for (const auto& [name, m] : unet.LoraTargets()) {
    std::string k = KohyaWith(table, /*ldm=*/false, name);
    if (!file->count(k + ".lora_down.weight")) {
      std::string ldm = KohyaWith(table, /*ldm=*/true, name);
      if (!ldm.empty() && file->count(ldm + ".lora_down.weight")) k = ldm;
    }
    auto d = file->find(k + ".lora_down.weight"), u = file->find(k + ".lora_up.weight");
    std::string want = KohyaWith(table, unet.config().has_text_time(), name);
    if (d == file->end()) return Status::Invalid("LoRA: missing key " + want + ".lora_down.weight");
    if (u == file->end()) return Status::Invalid("LoRA: missing key " + k + ".lora_up.weight");
    used.insert(d->first);
    used.insert(u->first);
    if (d->second.dim() != 2) return Status::Invalid("LoRA: " + d->first + " must be 2-D");
    int64_t r = d->second.size(0);
    double a = double(r);
    auto al = file->find(k + ".alpha");
    if (al != file->end()) {
      used.insert(al->first);
      if (al->second.numel() != 1) return Status::Invalid("LoRA: " + al->first + " not scalar");
      a = al->second.to(torch::kFloat64).item<double>();
    }
    if (rank != 0 && (r != rank || (have_alpha && a != alpha))) {
      return Status::Invalid("LoRA: layers with different rank/alpha are not supported");
    }
    rank = r;
    alpha = a;
    have_alpha = true;
    peft[PeftPrefix(name) + ".lora_A.weight"] = d->second;
    peft[PeftPrefix(name) + ".lora_B.weight"] = u->second;
  }
  for (const auto& [k, v] : *file) {
    if (!used.count(k)) return Status::Invalid("LoRA: unexpected key " + k);
  }
  return FromPeft(unet, peft, rank, alpha);
}

Status Lora::Assign(const TensorMap& peft) {
  if (peft.size() != 2 * targets_.size()) {
    return Status::Invalid("LoRA: expected " + std::to_string(2 * targets_.size()) + " tensors");
  }
  return CatchTorch("assigning LoRA", [&]() -> Status {
    torch::NoGradGuard no_grad;
    for (auto& [name, m] : targets_) {
      auto a = peft.find(PeftPrefix(name) + ".lora_A.weight");
      auto b = peft.find(PeftPrefix(name) + ".lora_B.weight");
      if (a == peft.end() || b == peft.end() || a->second.sizes() != m->lora_a.sizes() ||
          b->second.sizes() != m->lora_b.sizes()) {
        return Status::Invalid("LoRA: missing or mis-shaped tensors for " + PeftPrefix(name));
      }
      m->lora_a.copy_(a->second);
      m->lora_b.copy_(b->second);
    }
    return Status::Ok();
  });
}

std::vector<torch::Tensor> Lora::Parameters() const {
  std::vector<torch::Tensor> out;
  for (const auto& [name, m] : targets_) {
    out.push_back(m->lora_a);
    out.push_back(m->lora_b);
  }
  return out;
}

TensorMap Lora::PeftTensors() const {
  TensorMap out;
  for (const auto& [name, m] : targets_) {
    out[PeftPrefix(name) + ".lora_A.weight"] = m->lora_a.detach();
    out[PeftPrefix(name) + ".lora_B.weight"] = m->lora_b.detach();
  }
  return out;
}

TensorMap Lora::KohyaTensors() const {
  TensorMap out;
  for (size_t i = 0; i < targets_.size(); ++i) {
    const LoraLinearImpl* m = targets_[i].second;
    const std::string& k = kohya_[i];
    out[k + ".lora_down.weight"] = m->lora_a.detach();
    out[k + ".lora_up.weight"] = m->lora_b.detach();
    out[k + ".alpha"] = torch::tensor(float(alpha_), torch::kFloat32).reshape({});
  }
  return out;
}

TensorMap Lora::PeftGradients() const {
  TensorMap out;
  for (const auto& [name, m] : targets_) {
    torch::Tensor ga = m->lora_a.grad(), gb = m->lora_b.grad();
    out[PeftPrefix(name) + ".lora_A.weight"] = ga.defined() ? ga : torch::zeros_like(m->lora_a);
    out[PeftPrefix(name) + ".lora_B.weight"] = gb.defined() ? gb : torch::zeros_like(m->lora_b);
  }
  return out;
}

}  // namespace gleaner::train::lora_sd
