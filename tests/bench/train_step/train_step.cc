// bench_train_step: time lora-sd training steps on the SD 1.5 UNet architecture.
//
//   bench_train_step [--full] [--steps N] [--batches 1,4] [--size 64] [--rank 8]
//                    [--precision no,bf16] [--checkpointing off,on]
//
// --full builds the real SD 1.5 UNet (860M parameters, random initialisation); without it a
// reduced configuration of the same architecture (channels /10) that a CPU can step through.
// For each batch size, with and without gradient checkpointing, in fp32 (and bf16 when CUDA is
// available; --precision and --checkpointing choose instead), it runs one warm-up step and N
// timed steps of the real Trainer (noise, UNet forward/backward, AdamW) and prints s/step,
// images/s and peak memory (peak RSS on CPU, peak allocated on CUDA).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "agent/train/lora_sd/trainer.h"
#include "agent/train/nn/attention.h"

#ifdef GLEANER_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

using namespace gleaner;
using namespace gleaner::train;
using namespace gleaner::train::lora_sd;

namespace {

// Peak resident set size in MiB since the last ResetPeakRss (Linux /proc).
double PeakRssMiB() {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return 0;
  char line[256];
  double kb = 0;
  while (std::fgets(line, sizeof line, f)) {
    if (std::strncmp(line, "VmHWM:", 6) == 0) kb = std::atof(line + 6);
  }
  std::fclose(f);
  return kb / 1024.0;
}

void ResetPeakRss() {
  FILE* f = std::fopen("/proc/self/clear_refs", "w");
  if (f != nullptr) {
    std::fputs("5", f);
    std::fclose(f);
  }
}

// "a,b,c" -> {"a", "b", "c"}
std::vector<std::string> SplitList(char* list) {
  std::vector<std::string> out;
  for (char* p = std::strtok(list, ","); p; p = std::strtok(nullptr, ",")) out.push_back(p);
  return out;
}

UNetConfig Reduced() {
  UNetConfig c = Sd15Config();
  c.block_out_channels = {32, 64, 128, 128};
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  bool full = false;
  int steps = 3, size = 64, rank = 8;
  std::vector<int> batches = {1, 4};
  std::vector<std::string> precisions, checkpointing = {"off", "on"};
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--full") {
      full = true;
    } else if (a == "--steps" && i + 1 < argc) {
      steps = std::atoi(argv[++i]);
    } else if (a == "--size" && i + 1 < argc) {
      size = std::atoi(argv[++i]);
    } else if (a == "--rank" && i + 1 < argc) {
      rank = std::atoi(argv[++i]);
    } else if (a == "--precision" && i + 1 < argc) {
      precisions = SplitList(argv[++i]);
    } else if (a == "--checkpointing" && i + 1 < argc) {
      checkpointing = SplitList(argv[++i]);
    } else if (a == "--batches" && i + 1 < argc) {
      batches.clear();
      for (char* p = std::strtok(argv[++i], ","); p; p = std::strtok(nullptr, ",")) {
        batches.push_back(std::atoi(p));
      }
    } else {
      std::fprintf(stderr,
                   "usage: bench_train_step [--full] [--steps N] [--batches 1,4] [--size 64] "
                   "[--rank 8] [--precision no,bf16] [--checkpointing off,on]\n");
      return 64;
    }
  }
  UNetConfig cfg = full ? Sd15Config() : Reduced();
  bool cuda = torch::cuda::is_available();
  TensorMap weights = RandomWeights(cfg, 0);
  int64_t nparams = 0;
  for (const auto& [k, v] : weights) nparams += v.numel();
  std::printf(
      "config: %s UNet, %.1fM parameters, LoRA rank %d, latents %dx%d, device %s, "
      "%d threads, attention %s\n",
      full ? "SD 1.5" : "reduced SD 1.5 (channels 32/64/128/128)", double(nparams) / 1e6, rank,
      size, size, cuda ? "cuda" : "cpu", torch::get_num_threads(), AutoAttentionKernelName());
  std::printf("| batch | grad ckpt | precision | s/step | images/s | peak memory (MiB) |\n");
  std::printf("|---:|---|---|---:|---:|---:|\n");
  if (precisions.empty()) {
    precisions = cuda ? std::vector<std::string>{"no", "bf16"} : std::vector<std::string>{"no"};
  }
  for (const std::string& prec : precisions) {
    for (int batch : batches) {
      for (const std::string& ckpt_name : checkpointing) {
        bool ckpt = ckpt_name == "on";
        Dataset d;
        torch::manual_seed(1);
        d.latents = torch::randn({batch * 2, 4, size, size});
        d.text = torch::randn({batch * 2, 77, cfg.cross_attention_dim});
        Json pj = {{"steps", steps + 1},
                   {"batch_size", batch},
                   {"rank", rank},
                   {"alpha", rank},
                   {"gradient_checkpointing", ckpt},
                   {"mixed_precision", prec},
                   {"checkpoint_every", steps + 1}};
        Result<TrainParams> p = TrainParams::FromJson(pj, 0);
        if (!p.ok()) {
          std::fprintf(stderr, "%s\n", p.status().ToString().c_str());
          return 1;
        }
        auto t = Trainer::Create(cfg, weights, d, *p);
        if (!t.ok()) {
          std::fprintf(stderr, "%s\n", t.status().ToString().c_str());
          return 1;
        }
        Result<double> warm = (*t)->Step();  // warm-up (allocator, kernels)
        if (!warm.ok()) {
          std::fprintf(stderr, "%s\n", warm.status().ToString().c_str());
          return 1;
        }
        ResetPeakRss();
#ifdef GLEANER_WITH_CUDA
        if (cuda) c10::cuda::CUDACachingAllocator::resetPeakStats(0);
#endif
        auto start = std::chrono::steady_clock::now();
        for (int s = 0; s < steps; ++s) {
          if (!(*t)->Step().ok()) return 1;
        }
        if (cuda) torch::cuda::synchronize();
        double secs =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / steps;
        double peak = PeakRssMiB();
        const char* what = "RSS";
#ifdef GLEANER_WITH_CUDA
        if (cuda) {
          auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(0);
          peak = double(stats.allocated_bytes[0].peak) / (1 << 20);
          what = "GPU allocated";
        }
#endif
        std::printf("| %d | %s | %s | %.3f | %.2f | %.0f (%s) |\n", batch, ckpt ? "on" : "off",
                    prec == "no" ? "fp32" : prec.c_str(), secs, batch / secs, peak, what);
        std::fflush(stdout);
      }
    }
  }
  return 0;
}
