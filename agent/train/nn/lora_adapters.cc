#include "agent/train/nn/lora_adapters.h"

#include <cmath>
#include <cstdlib>

namespace gleaner::train {

std::string LoraKey(LoraFormat format, const LoraPrefixes& prefixes, const std::string& module,
                    LoraPart part) {
  if (format == LoraFormat::kPeft) {
    return prefixes.peft + "." + module +
           (part == LoraPart::kA ? ".lora_A.weight" : ".lora_B.weight");
  }
  std::string key = prefixes.kohya + "_" + module;
  for (size_t i = prefixes.kohya.size(); i < key.size(); ++i) {
    if (key[i] == '.') key[i] = '_';
  }
  return key + (part == LoraPart::kA   ? ".lora_down.weight"
                : part == LoraPart::kB ? ".lora_up.weight"
                                       : ".alpha");
}

namespace {

// The start every key of a component has in one format.
std::string KeyStart(LoraFormat format, const LoraPrefixes& prefixes) {
  return format == LoraFormat::kPeft ? prefixes.peft + "." : prefixes.kohya + "_";
}

bool StartsWith(const std::string& s, const std::string& start) {
  return s.rfind(start, 0) == 0;
}

}  // namespace

LoraAdapters::LoraAdapters(LoraPrefixes prefixes, Targets targets,
                           std::vector<std::string> kohya_paths, std::vector<KohyaFused> fused)
    : prefixes_(std::move(prefixes)),
      targets_(std::move(targets)),
      kohya_paths_(std::move(kohya_paths)),
      fused_(std::move(fused)) {}

bool LoraAdapters::IsFused(size_t i) const {
  for (const KohyaFused& f : fused_) {
    for (int t : f.targets) {
      if (t == int(i)) return true;
    }
  }
  return false;
}

std::string LoraAdapters::Key(size_t i, LoraFormat format, LoraPart part) const {
  bool own_kohya_path = format == LoraFormat::kKohya && i < kohya_paths_.size();
  return LoraKey(format, prefixes_, own_kohya_path ? kohya_paths_[i] : targets_[i].first, part);
}

void LoraAdapters::Set(LoraLinearImpl* m, const torch::Tensor& a, const torch::Tensor& b) {
  m->lora_a = a.to(m->weight.device(), torch::kFloat32).clone().requires_grad_(true);
  m->lora_b = b.to(m->weight.device(), torch::kFloat32).clone().requires_grad_(true);
  m->lora_scale = alpha_ / double(rank_);
}

Status LoraAdapters::Attach(int64_t rank, double alpha, torch::Generator gen) {
  if (rank < 1 || rank > 1024) return Status::Invalid("LoRA rank must be in [1, 1024]");
  rank_ = rank;
  alpha_ = alpha;
  return CatchTorch("attaching LoRA", [&]() -> Status {
    for (auto& [module, m] : targets_) {
      torch::Tensor a = torch::randn({rank, m->in_features}, gen, torch::kFloat32) / double(rank);
      Set(m, a, torch::zeros({m->out_features, rank}));
    }
    return Status::Ok();
  });
}

Result<LoraFormat> LoraAdapters::FormatIn(const TensorMap& file) const {
  bool peft = false, kohya = false;
  for (const auto& [key, value] : file) {
    peft = peft || StartsWith(key, KeyStart(LoraFormat::kPeft, prefixes_));
    kohya = kohya || StartsWith(key, KeyStart(LoraFormat::kKohya, prefixes_));
  }
  if (peft && kohya) {
    return Status::Invalid("LoRA: both PEFT (" + prefixes_.peft + ".) and kohya (" +
                           prefixes_.kohya + "_) keys");
  }
  if (!peft && !kohya) {
    return Status::NotFound("LoRA: no keys for " + prefixes_.peft + " (" + prefixes_.peft +
                            ".* or " + prefixes_.kohya + "_*)");
  }
  return peft ? LoraFormat::kPeft : LoraFormat::kKohya;
}

Status LoraAdapters::ReadTarget(size_t i, const TensorMap& file, LoraFormat format,
                                FileAdapter* out) const {
  std::string ka = Key(i, format, LoraPart::kA);
  std::string kb = Key(i, format, LoraPart::kB);
  auto a = file.find(ka), b = file.find(kb);
  if (a == file.end()) return Status::Invalid("LoRA: missing key " + ka);
  if (b == file.end()) return Status::Invalid("LoRA: missing key " + kb);
  out->a = a->second;
  out->b = b->second;
  out->keys = {ka, kb};
  out->alpha = out->a.dim() == 2 ? double(out->a.size(0)) : 0;
  if (format == LoraFormat::kKohya) {
    std::string kalpha = Key(i, format, LoraPart::kAlpha);
    auto al = file.find(kalpha);
    if (al != file.end()) {
      if (al->second.numel() != 1) return Status::Invalid("LoRA: " + kalpha + " is not a scalar");
      out->alpha = al->second.to(torch::kFloat64).item<double>();
      out->keys.push_back(kalpha);
    }
  }
  return Status::Ok();
}

Status LoraAdapters::ReadFused(const KohyaFused& f, const TensorMap& file,
                               std::vector<FileAdapter>* out) const {
  const std::string kd = LoraKey(LoraFormat::kKohya, prefixes_, f.path, LoraPart::kA);
  const std::string ku = LoraKey(LoraFormat::kKohya, prefixes_, f.path, LoraPart::kB);
  const std::string kalpha = LoraKey(LoraFormat::kKohya, prefixes_, f.path, LoraPart::kAlpha);
  auto d = file.find(kd), u = file.find(ku), al = file.find(kalpha);
  if (d == file.end()) return Status::Invalid("LoRA: missing key " + kd);
  if (u == file.end()) return Status::Invalid("LoRA: missing key " + ku);
  const torch::Tensor &down = d->second, &up = u->second;
  int64_t total = 0;
  for (int64_t r : f.rows) total += r;
  if (down.dim() != 2 || up.dim() != 2 || up.size(0) != total || up.size(1) != down.size(0) ||
      down.size(0) < 1 || !down.is_floating_point() || !up.is_floating_point()) {
    return Status::Invalid("LoRA: " + kd + " / " + ku + " must be float [R, in] / [" +
                           std::to_string(total) + ", R]");
  }
  const int64_t rank = down.size(0);
  double alpha = double(rank);
  std::vector<std::string> keys = {kd, ku};
  if (al != file.end()) {
    if (al->second.numel() != 1) return Status::Invalid("LoRA: " + kalpha + " is not a scalar");
    alpha = al->second.to(torch::kFloat64).item<double>();
    keys.push_back(kalpha);
  }
  std::vector<size_t> parts;  // the parts that are targets
  std::vector<int64_t> offset;
  int64_t at = 0;
  for (size_t j = 0; j < f.rows.size(); ++j) {
    offset.push_back(at);
    at += f.rows[j];
    if (f.targets[j] >= 0) parts.push_back(j);
  }
  const int64_t n = int64_t(parts.size());
  if (n == 0) return Status::Ok();
  // Exact when up is block-diagonal over the parts, one rank/n block each (as Tensors writes).
  bool exact = rank % n == 0;
  const int64_t r = exact ? rank / n : rank;
  if (exact && n > 1) {
    torch::NoGradGuard no_grad;
    torch::Tensor rest = up.clone();
    for (int64_t q = 0; q < n; ++q) {
      rest.narrow(0, offset[parts[q]], f.rows[parts[q]]).narrow(1, q * r, r).zero_();
    }
    exact = rest.abs().max().item<double>() == 0;
  }
  for (int64_t q = 0; q < n; ++q) {
    const size_t j = parts[q];
    FileAdapter& fa = (*out)[size_t(f.targets[j])];
    torch::Tensor rows = up.narrow(0, offset[j], f.rows[j]);
    if (exact) {
      fa.a = down.narrow(0, q * r, r);
      fa.b = rows.narrow(1, q * r, r);
      fa.alpha = alpha / double(n);
    } else {
      fa.a = down;
      fa.b = rows;
      fa.alpha = alpha;
    }
    fa.keys = keys;
  }
  return Status::Ok();
}

Status LoraAdapters::Read(const TensorMap& file, const std::map<std::string, std::string>& metadata,
                          std::set<std::string>* used) {
  Result<LoraFormat> format = FormatIn(file);
  if (!format.ok()) return format.status();
  std::vector<FileAdapter> got(targets_.size());
  Status read = CatchTorch("reading LoRA", [&]() -> Status {
    if (*format == LoraFormat::kKohya) {
      for (const KohyaFused& f : fused_) GLEANER_RETURN_IF_ERROR(ReadFused(f, file, &got));
    }
    for (size_t i = 0; i < targets_.size(); ++i) {
      if (*format == LoraFormat::kKohya && IsFused(i)) continue;
      GLEANER_RETURN_IF_ERROR(ReadTarget(i, file, *format, &got[i]));
    }
    return Status::Ok();
  });
  if (!read.ok()) return read;
  std::set<std::string> consumed;
  int64_t rank = 0;
  double alpha = 0;
  for (size_t i = 0; i < targets_.size(); ++i) {
    const LoraLinearImpl* m = targets_[i].second;
    const FileAdapter& fa = got[i];
    const torch::Tensor &ta = fa.a, &tb = fa.b;
    const std::string ka = fa.keys.empty() ? targets_[i].first : fa.keys[0];
    const std::string kb = fa.keys.size() < 2 ? targets_[i].first : fa.keys[1];
    if (!ta.defined() || !tb.defined()) return Status::Invalid("LoRA: missing " + ka);
    int64_t r = ta.dim() == 2 ? ta.size(0) : 0;
    if (r < 1 || ta.size(1) != m->in_features || tb.dim() != 2 || tb.size(0) != m->out_features ||
        tb.size(1) != r || !ta.is_floating_point() || !tb.is_floating_point()) {
      return Status::Invalid("LoRA: " + ka + " / " + kb + " must be float [r, " +
                             std::to_string(m->in_features) + "] / [" +
                             std::to_string(m->out_features) + ", r]");
    }
    if (rank != 0 && (r != rank || fa.alpha != alpha)) {
      return Status::Invalid("LoRA: layers with different rank or alpha are not supported");
    }
    rank = r;
    alpha = fa.alpha;
    consumed.insert(fa.keys.begin(), fa.keys.end());
  }
  auto meta_alpha = metadata.find("alpha");
  if (*format == LoraFormat::kPeft && meta_alpha != metadata.end()) {
    char* end = nullptr;
    alpha = std::strtod(meta_alpha->second.c_str(), &end);
    if (end == meta_alpha->second.c_str() || *end != '\0' || !std::isfinite(alpha)) {
      return Status::Invalid("LoRA: metadata alpha \"" + meta_alpha->second + "\" is not a number");
    }
  }
  const std::string start = KeyStart(*format, prefixes_);
  for (const auto& [key, value] : file) {
    if (StartsWith(key, start) && !consumed.count(key)) {
      return Status::Invalid("LoRA: unexpected key " + key);
    }
  }
  rank_ = rank;
  alpha_ = alpha;
  Status s = CatchTorch("loading LoRA", [&]() -> Status {
    for (size_t i = 0; i < targets_.size(); ++i) Set(targets_[i].second, got[i].a, got[i].b);
    return Status::Ok();
  });
  if (!s.ok()) return s;
  used->insert(consumed.begin(), consumed.end());
  return Status::Ok();
}

std::vector<torch::Tensor> LoraAdapters::Parameters() const {
  std::vector<torch::Tensor> out;
  for (const auto& [module, m] : targets_) {
    out.push_back(m->lora_a);
    out.push_back(m->lora_b);
  }
  return out;
}

namespace {

// One fused kohya layer's down [n*r, in] and up [rows, n*r] from its parts' A and B.
void PutFused(const KohyaFused& f, const std::vector<torch::Tensor>& a,
              const std::vector<torch::Tensor>& b, const LoraPrefixes& prefixes, double alpha,
              bool with_alpha, TensorMap* out) {
  std::vector<torch::Tensor> downs;
  std::vector<std::pair<int64_t, torch::Tensor>> ups;  // row offset, B
  int64_t total = 0;
  for (size_t j = 0; j < f.rows.size(); ++j) {
    if (f.targets[j] >= 0) {
      downs.push_back(a[size_t(f.targets[j])]);
      ups.emplace_back(total, b[size_t(f.targets[j])]);
    }
    total += f.rows[j];
  }
  if (downs.empty()) return;
  torch::Tensor down = torch::cat(downs, 0);
  const int64_t r = downs[0].size(0);
  torch::Tensor up = torch::zeros({total, down.size(0)}, down.options());
  for (size_t q = 0; q < ups.size(); ++q) {
    up.narrow(0, ups[q].first, ups[q].second.size(0))
        .narrow(1, int64_t(q) * r, r)
        .copy_(ups[q].second);
  }
  (*out)[LoraKey(LoraFormat::kKohya, prefixes, f.path, LoraPart::kA)] = down;
  (*out)[LoraKey(LoraFormat::kKohya, prefixes, f.path, LoraPart::kB)] = up;
  if (with_alpha) {
    (*out)[LoraKey(LoraFormat::kKohya, prefixes, f.path, LoraPart::kAlpha)] =
        torch::tensor(float(alpha * double(downs.size())), torch::kFloat32).reshape({});
  }
}

}  // namespace

TensorMap LoraAdapters::Tensors(LoraFormat format) const {
  TensorMap out;
  std::vector<torch::Tensor> a, b;
  for (size_t i = 0; i < targets_.size(); ++i) {
    const LoraLinearImpl* m = targets_[i].second;
    a.push_back(m->lora_a.detach());
    b.push_back(m->lora_b.detach());
    if (format == LoraFormat::kKohya && IsFused(i)) continue;
    out[Key(i, format, LoraPart::kA)] = a.back();
    out[Key(i, format, LoraPart::kB)] = b.back();
    if (format == LoraFormat::kKohya) {
      out[Key(i, format, LoraPart::kAlpha)] =
          torch::tensor(float(alpha_), torch::kFloat32).reshape({});
    }
  }
  if (format == LoraFormat::kKohya) {
    torch::NoGradGuard no_grad;
    for (const KohyaFused& f : fused_) PutFused(f, a, b, prefixes_, alpha_, true, &out);
  }
  return out;
}

TensorMap LoraAdapters::Gradients(LoraFormat format) const {
  TensorMap out;
  std::vector<torch::Tensor> a, b;
  for (size_t i = 0; i < targets_.size(); ++i) {
    const LoraLinearImpl* m = targets_[i].second;
    torch::Tensor ga = m->lora_a.grad(), gb = m->lora_b.grad();
    a.push_back(ga.defined() ? ga : torch::zeros_like(m->lora_a));
    b.push_back(gb.defined() ? gb : torch::zeros_like(m->lora_b));
    if (format == LoraFormat::kKohya && IsFused(i)) continue;
    out[Key(i, format, LoraPart::kA)] = a.back();
    out[Key(i, format, LoraPart::kB)] = b.back();
  }
  if (format == LoraFormat::kKohya) {
    torch::NoGradGuard no_grad;
    for (const KohyaFused& f : fused_) PutFused(f, a, b, prefixes_, alpha_, false, &out);
  }
  return out;
}

}  // namespace gleaner::train
