#include "agent/train/lora_sd/dataset.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "agent/protocol/trainer_protocol.h"
#include "agent/train/kinds.h"
#include "agent/train/nn/torch_io.h"

namespace gleaner::train::lora_sd {

Result<Dataset> LoadDataset(const std::string& path, int64_t channels, int64_t context_dim) {
  Result<TensorMap> f = LoadSafetensors(path);
  if (!f.ok()) return f.status();
  for (const auto& [k, v] : *f) {
    if (k != "latents" && k != "text_embeddings" && k != "class_latents" &&
        k != "class_text_embeddings") {
      return Status::Invalid("dataset: unknown tensor " + k);
    }
    if (!v.is_floating_point()) return Status::Invalid("dataset: " + k + " must be F32/F16/BF16");
  }
  auto check = [&](const char* lat, const char* txt, torch::Tensor* l, torch::Tensor* t,
                   bool required) -> Status {
    bool hl = f->count(lat), ht = f->count(txt);
    if (!hl && !ht && !required) return Status::Ok();
    if (!hl || !ht)
      return Status::Invalid(std::string("dataset: needs both ") + lat + " and " + txt);
    *l = f->at(lat).to(torch::kFloat32).contiguous();
    *t = f->at(txt).to(torch::kFloat32).contiguous();
    if (l->dim() != 4 || l->size(0) < 1 || l->size(1) != channels || l->size(2) % 8 != 0 ||
        l->size(3) % 8 != 0 || l->size(2) == 0 || l->size(3) == 0) {
      return Status::Invalid(std::string("dataset: ") + lat + " must be [N, " +
                             std::to_string(channels) + ", h, w] with h, w multiples of 8");
    }
    if (t->dim() != 3 || t->size(0) != l->size(0) || t->size(1) < 1 || t->size(2) != context_dim) {
      return Status::Invalid(std::string("dataset: ") + txt + " must be [N, T, " +
                             std::to_string(context_dim) + "] with N matching " + lat);
    }
    if (!torch::isfinite(*l).all().item<bool>() || !torch::isfinite(*t).all().item<bool>()) {
      return Status::Invalid(std::string("dataset: ") + lat + "/" + txt + " contain NaN or Inf");
    }
    return Status::Ok();
  };
  Dataset d;
  Status s = CatchTorch("loading dataset", [&]() -> Status {
    GLEANER_RETURN_IF_ERROR(check("latents", "text_embeddings", &d.latents, &d.text, true));
    return check("class_latents", "class_text_embeddings", &d.class_latents, &d.class_text, false);
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
    auto make = [&](int64_t n, int64_t offset, torch::Tensor* lat, torch::Tensor* txt) {
      torch::Tensor cls = (torch::arange(n, torch::kInt64) + offset) % o.classes;
      *lat = patterns.index_select(0, cls) +
             0.1 * torch::randn({n, o.channels, o.size, o.size}, gen, opts);
      *txt = words.index_select(0, cls) + 0.05 * torch::randn({n, o.tokens, o.dim}, gen, opts);
    };
    TensorMap t;
    make(o.n, 0, &t["latents"], &t["text_embeddings"]);
    if (o.prior) make(o.n, 1, &t["class_latents"], &t["class_text_embeddings"]);
    out = EncodeSafetensors(t, {{"format", "gleaner-lora-sd-dataset"},
                                {"version", "1"},
                                {"seed", std::to_string(o.seed)}});
    return Status::Ok();
  });
  if (!s.ok()) return s;
  return out;
}

}  // namespace gleaner::train::lora_sd

namespace gleaner::train {

int MakeDatasetMain(int argc, char** argv) {
  lora_sd::MakeDatasetOptions o;
  std::string out;
  for (int i = 0; i < argc; ++i) {
    std::string k = argv[i];
    if (k == "--prior") {
      o.prior = true;
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "gleaner-train make-dataset: %s needs a value\n", argv[i]);
      return kExitUsage;
    }
    std::string v = argv[++i];
    if (k == "--out") {
      out = v;
      continue;
    }
    char* end = nullptr;
    long long x = std::strtoll(v.c_str(), &end, 10);
    bool num_ok = end != v.c_str() && *end == '\0' && x >= 0;
    int64_t* dst = k == "--n"          ? &o.n
                   : k == "--size"     ? &o.size
                   : k == "--tokens"   ? &o.tokens
                   : k == "--dim"      ? &o.dim
                   : k == "--channels" ? &o.channels
                   : k == "--classes"  ? &o.classes
                                       : nullptr;
    if (k == "--seed" && num_ok) {
      o.seed = uint64_t(x);
    } else if (dst != nullptr && num_ok && x >= 1 && x <= 100000) {
      *dst = x;
    } else {
      std::fprintf(stderr, "gleaner-train make-dataset: bad argument %s %s\n", k.c_str(),
                   v.c_str());
      return kExitUsage;
    }
  }
  if (out.empty() || o.size % 8 != 0) {
    std::fprintf(stderr,
                 "usage: gleaner-train make-dataset --out FILE [--n 16] [--size 16 (multiple of "
                 "8)] [--tokens 8] [--dim 32] [--channels 4] [--classes 4] [--seed 0] "
                 "[--prior]\n");
    return kExitUsage;
  }
  Result<std::string> bytes = lora_sd::MakeDataset(o);
  Status s = bytes.ok() ? WriteFileDurable(out, *bytes) : bytes.status();
  if (!s.ok()) {
    std::fprintf(stderr, "gleaner-train make-dataset: %s\n", s.ToString().c_str());
    return kExitFailed;
  }
  return 0;
}

}  // namespace gleaner::train
