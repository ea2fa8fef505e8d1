// bench_replay_tolerance: how far a replay of a lora-sd training segment lands from the reference
// replay when it is honest but computed differently, and when it is wrong; the measurement behind
// the per-tensor tolerance of verified training (docs/architecture.md, "Comparison").
//
//   bench_replay_tolerance [--config tiny|reduced] [--k 5] [--m 10] [--size 8] [--batch 2]
//                          [--lr 1e-4] [--factor 10]
//
// One job (seed 0, data seed 1) trains in-process to checkpoint k (fp32, 2 threads). Each variant
// restores that checkpoint, trains to k+m and is compared with the reference replay (fp32,
// 2 threads) by training::CompareLora: max and median over tensors of the relative L2 distance.
// Honest: the same settings again; 1 intra-op thread; the start LoRA perturbed at fp32 rounding
// level (relative 2^-24, an emulation of another device's summation order: every op of a GPU
// rounds differently, this seeds one such difference and lets training amplify it); bf16 CPU
// autocast against an fp32 reference (the precision's own error) and against a bf16 reference
// (a bf16 pair with other thread counts). Wrong: stopping one step short, other data, noise of
// 1e-4/1e-3/1e-2 relative on the reference, the start checkpoint returned unchanged, another
// job's checkpoint at k+m. Then the rule: tolerance = factor x the largest honest distance of
// that precision, and its margin to the smallest wrong distance.
//
// --config tiny: agent/train's TinyConfig (2 levels, 32/64 channels); reduced: SD 1.5's
// architecture with channels 32/64/128/128 (10M parameters, as bench_train_step).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "agent/train/models/unet/unet.h"
#include "agent/train/training/replay_distance.h"
#include "agent/train/training/trainer.h"

using namespace gleaner;
using namespace gleaner::train;
using namespace gleaner::train::unet;
using namespace gleaner::train::training;

namespace {

struct Setup {
  UNetConfig cfg;
  TensorMap weights;
  int64_t k = 5, m = 10, size = 8, batch = 2;
  double lr = 1e-4;
  std::string dir;  // scratch: checkpoint k
};

// Random training data shaped for cfg: 8 examples, latents size x size, 8 text tokens.
Dataset RandomData(const UNetConfig& cfg, int64_t size, uint64_t seed) {
  torch::Generator g = at::detail::createCPUGenerator(seed);
  const int64_t n = 8;
  Dataset d;
  d.instance.latents = torch::randn({n, cfg.in_channels, size, size}, g, torch::kFloat32);
  d.instance.text = torch::randn({n, 8, cfg.cross_attention_dim}, g, torch::kFloat32);
  if (cfg.has_text_time()) {
    d.instance.pooled = torch::randn({n, cfg.pooled_dim()}, g, torch::kFloat32);
    float px = float(size * 8);
    d.instance.time_ids = torch::tensor({px, px, 0.f, 0.f, px, px}).repeat({n, 1});
  }
  return d;
}

std::unique_ptr<Trainer> MustTrainer(const Setup& s, uint64_t data_seed, int64_t job_seed,
                                     const char* precision) {
  Json pj = {{"steps", s.k + s.m},
             {"batch_size", s.batch},
             {"rank", 4},
             {"alpha", 4},
             {"learning_rate", s.lr},
             {"seed", job_seed},
             {"mixed_precision", precision},
             {"checkpoint_every", s.k + s.m}};
  Result<LoraSdParams> p = LoraSdParams::Parse(pj);
  Result<std::unique_ptr<Trainer>> t =
      p.ok() ? Trainer::Create(s.cfg, s.weights, RandomData(s.cfg, s.size, data_seed), *p)
             : Result<std::unique_ptr<Trainer>>(p.status());
  if (!t.ok()) {
    std::fprintf(stderr, "bench_replay_tolerance: %s\n", t.status().ToString().c_str());
    std::exit(1);
  }
  return std::move(*t);
}

void MustStep(Trainer* t) {
  Result<double> r = t->Step();
  if (!r.ok()) {
    std::fprintf(stderr, "bench_replay_tolerance: %s\n", r.status().ToString().c_str());
    std::exit(1);
  }
}

TensorMap Snapshot(const Trainer& t) {
  TensorMap out;
  for (const auto& [k, v] : t.lora().PeftTensors()) out[k] = v.detach().clone();
  return out;
}

struct Replay {
  std::string precision = "no";
  int threads = 2;
  uint64_t data_seed = 1;
  double start_perturbation = 0;  // relative noise on the start LoRA
  int64_t steps = -1;             // -1: m
};

// Restores checkpoint k under `r` and trains r.steps (default m) steps; the LoRA at the end.
TensorMap RunReplay(const Setup& s, const Replay& r) {
  torch::set_num_threads(r.threads);
  std::unique_ptr<Trainer> t = MustTrainer(s, r.data_seed, 0, r.precision.c_str());
  Status st = t->Restore(s.dir + "/ckpt-k");
  if (!st.ok()) {
    std::fprintf(stderr, "bench_replay_tolerance: %s\n", st.ToString().c_str());
    std::exit(1);
  }
  if (r.start_perturbation > 0) {
    torch::NoGradGuard no_grad;
    torch::Generator g = at::detail::createCPUGenerator(99);
    for (torch::Tensor p : t->lora().Parameters()) {
      p.mul_(1 + r.start_perturbation * torch::randn(p.sizes(), g, torch::kFloat32));
    }
  }
  int64_t n = r.steps < 0 ? s.m : r.steps;
  for (int64_t i = 0; i < n; ++i) MustStep(t.get());
  torch::set_num_threads(2);
  return Snapshot(*t);
}

// The reference plus relative noise `rel` per tensor (distance about rel).
TensorMap Noisy(const TensorMap& ref, double rel) {
  torch::Generator g = at::detail::createCPUGenerator(7);
  TensorMap out;
  for (const auto& [k, v] : ref) {
    double scale = rel * v.norm().item<double>() / std::sqrt(double(v.numel()));
    out[k] = v + scale * torch::randn(v.sizes(), g, torch::kFloat32);
  }
  return out;
}

struct Row {
  std::string name;
  bool honest;
  std::string precision;  // the precision pair the honest row bounds ("fp32", "bf16")
  double max, median;
};

Row Measure(const char* name, bool honest, const char* precision, const TensorMap& got,
            const TensorMap& ref) {
  Result<ReplayDistance> d = CompareLora(got, ref, 0);
  if (!d.ok()) {
    std::fprintf(stderr, "bench_replay_tolerance: %s\n", d.status().ToString().c_str());
    std::exit(1);
  }
  return {name, honest, precision, d->worst, d->median};
}

UNetConfig Reduced() {
  UNetConfig c = Sd15Config();
  c.block_out_channels = {32, 64, 128, 128};
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  Setup s;
  std::string config = "tiny";
  double factor = 10;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    bool has = i + 1 < argc;
    if (a == "--config" && has) {
      config = argv[++i];
    } else if (a == "--k" && has) {
      s.k = std::atoll(argv[++i]);
    } else if (a == "--m" && has) {
      s.m = std::atoll(argv[++i]);
    } else if (a == "--size" && has) {
      s.size = std::atoll(argv[++i]);
    } else if (a == "--batch" && has) {
      s.batch = std::atoll(argv[++i]);
    } else if (a == "--lr" && has) {
      s.lr = std::atof(argv[++i]);
    } else if (a == "--factor" && has) {
      factor = std::atof(argv[++i]);
    } else {
      std::fprintf(stderr,
                   "usage: bench_replay_tolerance [--config tiny|reduced] [--k 5] [--m 10] "
                   "[--size 8] [--batch 2] [--lr 1e-4] [--factor 10]\n");
      return 64;
    }
  }
  if ((config != "tiny" && config != "reduced") || s.k < 1 || s.m < 2 || s.size < 8) {
    std::fprintf(stderr, "bench_replay_tolerance: bad --config, --k, --m or --size\n");
    return 64;
  }
  auto start = std::chrono::steady_clock::now();
  s.cfg = config == "tiny" ? TinyConfig() : Reduced();
  s.weights = RandomWeights(s.cfg, 0);
  char tmpl[] = "/tmp/bench-replay-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) return 1;
  s.dir = tmpl;

  // The job up to checkpoint k (fp32, 2 threads).
  torch::set_num_threads(2);
  {
    std::unique_ptr<Trainer> t = MustTrainer(s, 1, 0, "no");
    for (int64_t i = 0; i < s.k; ++i) MustStep(t.get());
    Status st = t->SaveCheckpoint(s.dir + "/ckpt-k", "job-a");
    if (!st.ok()) {
      std::fprintf(stderr, "bench_replay_tolerance: %s\n", st.ToString().c_str());
      return 1;
    }
  }
  Replay fp32;
  TensorMap ref = RunReplay(s, fp32);
  Replay bf16;
  bf16.precision = "bf16";
  TensorMap ref_bf16 = RunReplay(s, bf16);

  std::vector<Row> rows;
  rows.push_back(Measure("same settings again", true, "fp32", RunReplay(s, fp32), ref));
  Replay one_thread = fp32;
  one_thread.threads = 1;
  rows.push_back(
      Measure("1 intra-op thread (reference 2)", true, "fp32", RunReplay(s, one_thread), ref));
  Replay rounding = fp32;
  rounding.start_perturbation = std::ldexp(1.0, -24);
  rows.push_back(Measure("start LoRA x (1 + 2^-24 noise): rounding-order emulation", true, "fp32",
                         RunReplay(s, rounding), ref));
  Replay bf16_one_thread = bf16;
  bf16_one_thread.threads = 1;
  rows.push_back(Measure("bf16 vs bf16 reference, 1 thread (reference 2)", true, "bf16",
                         RunReplay(s, bf16_one_thread), ref_bf16));
  Replay bf16_rounding = bf16;
  bf16_rounding.start_perturbation = std::ldexp(1.0, -24);
  rows.push_back(Measure("bf16 vs bf16 reference, start x (1 + 2^-24 noise)", true, "bf16",
                         RunReplay(s, bf16_rounding), ref_bf16));
  rows.push_back(
      Measure("bf16 vs fp32 reference (mixed precision pair)", true, "bf16/fp32", ref_bf16, ref));

  Replay short_by_one = fp32;
  short_by_one.steps = s.m - 1;
  rows.push_back(Measure("stopped at k+m-1", false, "", RunReplay(s, short_by_one), ref));
  Replay other_data = fp32;
  other_data.data_seed = 2;
  rows.push_back(Measure("other data (data seed 2)", false, "", RunReplay(s, other_data), ref));
  for (double rel : {1e-4, 1e-3, 1e-2}) {
    char name[64];
    std::snprintf(name, sizeof name, "reference + %.0e relative noise", rel);
    rows.push_back(Measure(name, false, "", Noisy(ref, rel), ref));
  }
  Replay none = fp32;
  none.steps = 0;
  rows.push_back(Measure("start checkpoint k unchanged", false, "", RunReplay(s, none), ref));
  {
    torch::set_num_threads(2);
    std::unique_ptr<Trainer> other = MustTrainer(s, 2, 1, "no");
    for (int64_t i = 0; i < s.k + s.m; ++i) MustStep(other.get());
    rows.push_back(
        Measure("another job's checkpoint k+m (seed 1, data 2)", false, "", Snapshot(*other), ref));
  }

  int64_t lora_tensors = int64_t(ref.size());
  std::printf(
      "config: %s UNet, latents %lldx%lld, batch %lld, LoRA rank 4 (%lld tensors), lr %g, "
      "segment k=%lld -> k+m=%lld, cpu\n",
      config.c_str(), (long long)s.size, (long long)s.size, (long long)s.batch,
      (long long)lora_tensors, s.lr, (long long)s.k, (long long)(s.k + s.m));
  std::printf("| variant | honest | max rel-L2 | median rel-L2 |\n|---|---|---:|---:|\n");
  // The rule per precision: factor x the largest honest distance, against the smallest wrong one.
  // bf16 across implementations (GPU kernels, CUDA vs CPU) is not measurable here: the bf16 vs
  // fp32 row bounds it from above (every op rounded at bf16 resolution one way and not the other).
  double honest_fp32 = 0, honest_bf16 = 0, bf16_vs_fp32 = 0;
  const Row* weakest = nullptr;
  for (const Row& r : rows) {
    std::printf("| %s | %s | %.3g | %.3g |\n", r.name.c_str(), r.honest ? "yes" : "no", r.max,
                r.median);
    if (r.honest && r.precision == "fp32") honest_fp32 = std::max(honest_fp32, r.max);
    if (r.honest && r.precision == "bf16") honest_bf16 = std::max(honest_bf16, r.max);
    if (r.honest && r.precision == "bf16/fp32") bf16_vs_fp32 = r.max;
    if (!r.honest && (weakest == nullptr || r.max < weakest->max)) weakest = &r;
  }
  struct Rule {
    const char* name;
    double honest;
  };
  for (const Rule& rule :
       {Rule{"fp32 (CPU, any thread count)", honest_fp32},
        Rule{"bf16 (CPU autocast, one implementation)", honest_bf16},
        Rule{"bf16 across implementations (bound: bf16 vs fp32)", bf16_vs_fp32}}) {
    double tol = factor * rule.honest;
    std::printf(
        "rule %s: tolerance = %g x %.3g = %.3g; smallest wrong (%s) %.3g = %.3g x tolerance\n",
        rule.name, factor, rule.honest, tol, weakest->name.c_str(), weakest->max,
        tol > 0 ? weakest->max / tol : std::numeric_limits<double>::infinity());
  }
  std::printf(
      "note: honest distances grow with m, bf16 ones in a jump once a rounding flips (see "
      "docs/benchmarks.md): measure with --m set to the job's checkpoint interval\n");
  std::printf("wall time %.1f s\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  std::error_code ec;
  std::filesystem::remove_all(s.dir, ec);
  return 0;
}
