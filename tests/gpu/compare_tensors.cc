// compare_tensors: checks a safetensors file against a reference file, for the fixture checks
// that run on CPU in CI and on CUDA in tests/gpu/run.sh (check_unet_fixtures.sh).
//
//   compare_tensors GOT REF [--rel-l2 B] [--max-abs B] [--report FILE --label L]
//
// Every tensor of REF must be in GOT with the same shape (GOT may hold more). For each, in
// float64: rel-L2 = ||got - ref|| / ||ref||, max abs = max |got - ref|. A bound that is given
// holds for every tensor. Prints one line with the worst tensor of each measure; --report appends
// the same as one JSON object line ({label, tensors, rel_l2, rel_l2_key, max_abs, max_abs_key,
// bound_rel_l2, bound_max_abs, ok}). Exit 0 within the bounds, 1 outside them, 2 when a file is
// unreadable or does not match REF's keys and shapes, 64 usage.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "agent/train/nn/torch_io.h"
#include "shared/json.h"

using namespace gleaner;
using namespace gleaner::train;

namespace {

struct Worst {
  double value = 0;
  std::string key;
  void Update(double v, const std::string& k) {
    if (std::isnan(v)) v = INFINITY;  // NaN fails every bound
    if (key.empty() || v > value) {
      value = v;
      key = k;
    }
  }
};

int Usage() {
  std::fprintf(stderr,
               "usage: compare_tensors GOT REF [--rel-l2 B] [--max-abs B] "
               "[--report FILE --label L]\n");
  return 64;
}

bool ParseBound(const char* text, double* out) {
  char* end = nullptr;
  *out = std::strtod(text, &end);
  return end != text && *end == '\0' && *out > 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return Usage();
  std::string got_path = argv[1], ref_path = argv[2], report, label;
  double bound_rel = 0, bound_abs = 0;  // 0: not checked
  for (int i = 3; i < argc; i += 2) {
    std::string flag = argv[i];
    if (i + 1 >= argc) return Usage();
    const char* value = argv[i + 1];
    if (flag == "--rel-l2") {
      if (!ParseBound(value, &bound_rel)) return Usage();
    } else if (flag == "--max-abs") {
      if (!ParseBound(value, &bound_abs)) return Usage();
    } else if (flag == "--report") {
      report = value;
    } else if (flag == "--label") {
      label = value;
    } else {
      return Usage();
    }
  }
  Result<TensorMap> got = LoadSafetensors(got_path);
  Result<TensorMap> ref = LoadSafetensors(ref_path);
  for (const Result<TensorMap>* r : {&got, &ref}) {
    if (!r->ok()) {
      std::fprintf(stderr, "compare_tensors: %s\n", r->status().ToString().c_str());
      return 2;
    }
  }
  Worst rel, abs;
  Status s = CatchTorch("comparing", [&]() -> Status {
    for (const auto& [key, r] : *ref) {
      auto it = got->find(key);
      if (it == got->end()) return Status::Invalid(got_path + ": no tensor " + key);
      if (it->second.sizes() != r.sizes()) return Status::Invalid(key + ": shapes differ");
      torch::Tensor g64 = it->second.to(torch::kFloat64), r64 = r.to(torch::kFloat64);
      torch::Tensor d = g64 - r64;
      rel.Update((d.norm() / r64.norm()).item<double>(), key);
      abs.Update(d.numel() == 0 ? 0.0 : d.abs().max().item<double>(), key);
    }
    return Status::Ok();
  });
  if (!s.ok()) {
    std::fprintf(stderr, "compare_tensors: %s\n", s.ToString().c_str());
    return 2;
  }
  bool ok =
      (bound_rel == 0 || rel.value <= bound_rel) && (bound_abs == 0 || abs.value <= bound_abs);
  std::printf(
      "%s%s: %zu tensors, worst rel-L2 %.3g (%s, bound %.3g), worst max abs %.3g (%s, "
      "bound %.3g)\n",
      ok ? "ok" : "FAIL", label.empty() ? "" : (" " + label).c_str(), ref->size(), rel.value,
      rel.key.c_str(), bound_rel, abs.value, abs.key.c_str(), bound_abs);
  if (!report.empty()) {
    Json line = {{"label", label},
                 {"tensors", ref->size()},
                 {"rel_l2", rel.value},
                 {"rel_l2_key", rel.key},
                 {"max_abs", abs.value},
                 {"max_abs_key", abs.key},
                 {"bound_rel_l2", bound_rel},
                 {"bound_max_abs", bound_abs},
                 {"ok", ok}};
    FILE* f = std::fopen(report.c_str(), "a");
    if (f == nullptr || std::fprintf(f, "%s\n", DumpJson(line).c_str()) < 0 ||
        std::fclose(f) != 0) {
      std::fprintf(stderr, "compare_tensors: cannot append to %s\n", report.c_str());
      return 2;
    }
  }
  return ok ? 0 : 1;
}
