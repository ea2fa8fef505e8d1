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

LoraAdapters::LoraAdapters(LoraPrefixes prefixes, Targets targets)
    : prefixes_(std::move(prefixes)), targets_(std::move(targets)) {}

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

Status LoraAdapters::Read(const TensorMap& file, const std::map<std::string, std::string>& metadata,
                          std::set<std::string>* used) {
  Result<LoraFormat> format = FormatIn(file);
  if (!format.ok()) return format.status();
  std::set<std::string> consumed;
  int64_t rank = 0;
  double alpha = 0;
  std::vector<std::pair<torch::Tensor, torch::Tensor>> ab;
  for (const auto& [module, m] : targets_) {
    std::string ka = LoraKey(*format, prefixes_, module, LoraPart::kA);
    std::string kb = LoraKey(*format, prefixes_, module, LoraPart::kB);
    auto a = file.find(ka), b = file.find(kb);
    if (a == file.end()) return Status::Invalid("LoRA: missing key " + ka);
    if (b == file.end()) return Status::Invalid("LoRA: missing key " + kb);
    const torch::Tensor &ta = a->second, &tb = b->second;
    int64_t r = ta.dim() == 2 ? ta.size(0) : 0;
    if (r < 1 || ta.size(1) != m->in_features || tb.dim() != 2 || tb.size(0) != m->out_features ||
        tb.size(1) != r || !ta.is_floating_point() || !tb.is_floating_point()) {
      return Status::Invalid("LoRA: " + ka + " / " + kb + " must be float [r, " +
                             std::to_string(m->in_features) + "] / [" +
                             std::to_string(m->out_features) + ", r]");
    }
    double a_value = double(r);
    if (*format == LoraFormat::kKohya) {
      std::string kalpha = LoraKey(*format, prefixes_, module, LoraPart::kAlpha);
      auto al = file.find(kalpha);
      if (al != file.end()) {
        if (al->second.numel() != 1) return Status::Invalid("LoRA: " + kalpha + " is not a scalar");
        a_value = al->second.to(torch::kFloat64).item<double>();
        consumed.insert(kalpha);
      }
    }
    if (rank != 0 && (r != rank || a_value != alpha)) {
      return Status::Invalid("LoRA: layers with different rank or alpha are not supported");
    }
    rank = r;
    alpha = a_value;
    consumed.insert(ka);
    consumed.insert(kb);
    ab.emplace_back(ta, tb);
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
    for (size_t i = 0; i < targets_.size(); ++i) Set(targets_[i].second, ab[i].first, ab[i].second);
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

TensorMap LoraAdapters::Tensors(LoraFormat format) const {
  TensorMap out;
  for (const auto& [module, m] : targets_) {
    out[LoraKey(format, prefixes_, module, LoraPart::kA)] = m->lora_a.detach();
    out[LoraKey(format, prefixes_, module, LoraPart::kB)] = m->lora_b.detach();
    if (format == LoraFormat::kKohya) {
      out[LoraKey(format, prefixes_, module, LoraPart::kAlpha)] =
          torch::tensor(float(alpha_), torch::kFloat32).reshape({});
    }
  }
  return out;
}

TensorMap LoraAdapters::Gradients(LoraFormat format) const {
  TensorMap out;
  for (const auto& [module, m] : targets_) {
    torch::Tensor ga = m->lora_a.grad(), gb = m->lora_b.grad();
    out[LoraKey(format, prefixes_, module, LoraPart::kA)] =
        ga.defined() ? ga : torch::zeros_like(m->lora_a);
    out[LoraKey(format, prefixes_, module, LoraPart::kB)] =
        gb.defined() ? gb : torch::zeros_like(m->lora_b);
  }
  return out;
}

}  // namespace gleaner::train
