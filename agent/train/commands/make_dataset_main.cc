// `gleaner-train make-dataset`: a random latents-and-embeddings dataset (training/dataset.h's
// MakeDataset) for tests, benchmarks and demos without photos.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "agent/protocol/trainer_protocol.h"
#include "agent/train/commands/commands.h"
#include "agent/train/nn/torch_io.h"
#include "agent/train/training/dataset.h"

namespace gleaner::train {

int MakeDatasetMain(int argc, char** argv) {
  training::MakeDatasetOptions o;
  std::string out;
  for (int i = 0; i < argc; ++i) {
    std::string k = argv[i];
    if (k == "--prior" || k == "--sdxl" || k == "--no-time-ids") {
      if (k == "--prior") o.prior = true;
      if (k == "--no-time-ids") o.time_ids = false;       // pooled embeddings only (FLUX)
      if (k == "--sdxl" && o.pooled == 0) o.pooled = 32;  // the tiny SDXL config's P
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
                   : k == "--pooled"   ? &o.pooled
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
                 "[--prior] [--sdxl] [--pooled 32] [--no-time-ids]\n");
    return kExitUsage;
  }
  Result<std::string> bytes = training::MakeDataset(o);
  Status s = bytes.ok() ? WriteFileDurable(out, *bytes) : bytes.status();
  if (!s.ok()) {
    std::fprintf(stderr, "gleaner-train make-dataset: %s\n", s.ToString().c_str());
    return kExitFailed;
  }
  return 0;
}

}  // namespace gleaner::train
