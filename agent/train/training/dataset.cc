#include "agent/train/training/dataset.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>

#include "agent/protocol/trainer_protocol.h"
#include "agent/train/nn/torch_io.h"

namespace gleaner::train::training {

namespace {

std::string Shape(const torch::Tensor& t) {
  std::string s = "[";
  for (int64_t i = 0; i < t.dim(); ++i) s += (i ? ", " : "") + std::to_string(t.size(i));
  return s + "]";
}

// Reads one set of examples, `prefix` "" (instance) or "class_" (prior preservation).
Status ReadExamples(const TensorMap& f, const std::string& prefix, const DenoiserShape& c,
                    bool required, Examples* out) {
  const std::string lat = prefix + "latents", txt = prefix + "text_embeddings",
                    pooled = prefix + "pooled_text_embeddings", ids = prefix + "time_ids";
  bool hl = f.count(lat), ht = f.count(txt), hp = f.count(pooled), hi = f.count(ids);
  if (!hl && !ht && !hp && !hi && !required) return Status::Ok();
  if (!hl || !ht) return Status::Invalid("dataset: needs both " + lat + " and " + txt);
  out->latents = f.at(lat).to(torch::kFloat32).contiguous();
  out->text = f.at(txt).to(torch::kFloat32).contiguous();
  const torch::Tensor& l = out->latents;
  const torch::Tensor& t = out->text;
  if (l.dim() != 4 || l.size(0) < 1 || l.size(1) != c.latent_channels || l.size(2) % 8 != 0 ||
      l.size(3) % 8 != 0 || l.size(2) == 0 || l.size(3) == 0) {
    return Status::Invalid("dataset: " + lat + " must be [N, " + std::to_string(c.latent_channels) +
                           ", h, w] with h, w multiples of 8; got " + Shape(l));
  }
  const int64_t n = l.size(0);
  if (t.dim() != 3 || t.size(0) != n || t.size(1) < 1 || t.size(2) != c.context_dim) {
    return Status::Invalid("dataset: " + txt + " must be [" + std::to_string(n) + ", T, " +
                           std::to_string(c.context_dim) + "] (N as " + lat +
                           ", D = the denoiser's context width); got " + Shape(t));
  }
  std::vector<const torch::Tensor*> all = {&out->latents, &out->text};
  // Pooled text embeddings: SDXL and FLUX (P = pooled_dim); time ids: SDXL only.
  const int64_t p = c.pooled_dim;
  if (p == 0 && (hp || hi)) {
    return Status::Invalid("dataset: " + std::string(hp ? pooled : ids) +
                           " is for SDXL, but the model takes no pooled text embedding or "
                           "time ids");
  }
  if (!c.time_ids && hi) {
    return Status::Invalid("dataset: " + ids + " is for SDXL, but the model takes no time ids");
  }
  if (p > 0) {
    const std::string why = " (P = the model's pooled text embedding width)";
    if (!hp || (c.time_ids && !hi)) {
      return Status::Invalid("dataset: missing " + std::string(!hp ? pooled : ids) + " [" +
                             std::to_string(n) + ", " + (!hp ? std::to_string(p) : "6") + "]" +
                             why);
    }
    out->pooled = f.at(pooled).to(torch::kFloat32).contiguous();
    if (out->pooled.dim() != 2 || out->pooled.size(0) != n || out->pooled.size(1) != p) {
      return Status::Invalid("dataset: " + pooled + " must be [" + std::to_string(n) + ", " +
                             std::to_string(p) + "]" + why + "; got " + Shape(out->pooled));
    }
    all.push_back(&out->pooled);
  }
  if (c.time_ids) {
    out->time_ids = f.at(ids).to(torch::kFloat32).contiguous();
    if (out->time_ids.dim() != 2 || out->time_ids.size(0) != n || out->time_ids.size(1) != 6) {
      return Status::Invalid(
          "dataset: " + ids + " must be [" + std::to_string(n) +
          ", 6] (orig_h, orig_w, crop_top, crop_left, target_h, target_w); got " +
          Shape(out->time_ids));
    }
    all.push_back(&out->time_ids);
  }
  for (const torch::Tensor* x : all) {
    if (!torch::isfinite(*x).all().item<bool>()) {
      return Status::Invalid("dataset: " + prefix + "tensors contain NaN or Inf");
    }
  }
  return Status::Ok();
}

}  // namespace

Result<Dataset> LoadDataset(const std::string& path, const DenoiserShape& config) {
  Result<TensorMap> f = LoadSafetensors(path);
  if (!f.ok()) return f.status();
  static const std::set<std::string> kKnown = {
      "latents",       "text_embeddings",       "pooled_text_embeddings",       "time_ids",
      "class_latents", "class_text_embeddings", "class_pooled_text_embeddings", "class_time_ids"};
  for (const auto& [k, v] : *f) {
    if (!kKnown.count(k)) return Status::Invalid("dataset: unknown tensor " + k);
    if (!v.is_floating_point()) return Status::Invalid("dataset: " + k + " must be F32/F16/BF16");
  }
  Dataset d;
  Status s = CatchTorch("loading dataset", [&]() -> Status {
    GLEANER_RETURN_IF_ERROR(ReadExamples(*f, "", config, /*required=*/true, &d.instance));
    GLEANER_RETURN_IF_ERROR(ReadExamples(*f, "class_", config, /*required=*/false, &d.prior));
    if (d.has_prior() && d.prior.text.size(1) != d.instance.text.size(1)) {
      return Status::Invalid(
          "dataset: class_text_embeddings must have as many tokens as text_embeddings");
    }
    return Status::Ok();
  });
  if (!s.ok()) return s;
  return d;
}

Result<std::string> MakeDataset(const MakeDatasetOptions& o) {
  Result<std::string> out = Status::Internal("not made");
  Status s = CatchTorch("make-dataset", [&]() -> Status {
    torch::Generator gen = at::detail::createCPUGenerator(o.seed);
    auto opts = torch::TensorOptions().dtype(torch::kFloat32);
    // Concepts: smooth latent patterns (upsampled coarse noise) and text embeddings.
    torch::Tensor coarse = torch::randn({o.classes, o.channels, 4, 4}, gen, opts);
    torch::Tensor patterns =
        torch::upsample_bilinear2d(coarse, {o.size, o.size}, /*align_corners=*/false);
    torch::Tensor words = torch::randn({o.classes, o.tokens, o.dim}, gen, opts);
    torch::Tensor pooled;
    if (o.pooled > 0) pooled = torch::randn({o.classes, o.pooled}, gen, opts);
    TensorMap t;
    auto make = [&](int64_t n, int64_t offset, const std::string& prefix) {
      torch::Tensor cls = (torch::arange(n, torch::kInt64) + offset) % o.classes;
      t[prefix + "latents"] = patterns.index_select(0, cls) +
                              0.1 * torch::randn({n, o.channels, o.size, o.size}, gen, opts);
      t[prefix + "text_embeddings"] =
          words.index_select(0, cls) + 0.05 * torch::randn({n, o.tokens, o.dim}, gen, opts);
      if (o.pooled > 0) {
        t[prefix + "pooled_text_embeddings"] =
            pooled.index_select(0, cls) + 0.05 * torch::randn({n, o.pooled}, gen, opts);
        float px = float(o.size * 8);  // latents are 1/8 of the image size
        if (o.time_ids) {
          t[prefix + "time_ids"] = torch::tensor({px, px, 0.f, 0.f, px, px}).repeat({n, 1});
        }
      }
    };
    make(o.n, 0, "");
    if (o.prior) make(o.n, 1, "class_");
    out = EncodeSafetensors(t, {{"format", "gleaner-lora-sd-dataset"},
                                {"version", "1"},
                                {"seed", std::to_string(o.seed)}});
    return Status::Ok();
  });
  if (!s.ok()) return s;
  return out;
}

}  // namespace gleaner::train::training
