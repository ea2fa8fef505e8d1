// bench_train_step: time lora-sd training steps on the SD 1.5 or SDXL UNet architecture.
//
//   bench_train_step [--sdxl] [--full] [--steps N] [--batches 1,4] [--size 64] [--rank 8]
//                    [--precision no,bf16] [--checkpointing off,on]
//
// --full builds the real UNet (SD 1.5: 860M parameters; --sdxl: SDXL base, 2.57B; random
// initialisation); without it a reduced configuration of the same architecture (channels /10)
// that a CPU can step through. For each batch size, with and without gradient checkpointing, in
// fp32 (and bf16 when CUDA is available; --precision and --checkpointing choose instead) it runs
// one warm-up step and N timed steps of the real Trainer (noise, UNet forward/backward, AdamW) and
// prints s/step, images/s, the memory held between steps and the peak during a step (resident set
// on CPU, allocated on CUDA). SDXL rows use SDXL's inputs: 77 tokens of 2048, a pooled embedding
// and time_ids. Defaults for --sdxl --full: 128x128 latents (1024x1024 images), batch 1,
// checkpointing on, bf16 on CUDA, rank 8.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "agent/train/models/unet/unet.h"
#include "agent/train/nn/attention.h"
#include "agent/train/training/trainer.h"

#ifdef GLEANER_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

using namespace gleaner;
using namespace gleaner::train;
using namespace gleaner::train::unet;
using namespace gleaner::train::training;

namespace {

// A /proc/self/status field in MiB: "VmHWM:" (peak resident set size since the last
// ResetPeakRss) or "VmRSS:" (resident now).
double StatusMiB(const char* field) {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return 0;
  char line[256];
  double kb = 0;
  while (std::fgets(line, sizeof line, f)) {
    if (std::strncmp(line, field, std::strlen(field)) == 0) kb = std::atof(line + 6);
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

// The same architecture with channels / 10 (heads keep head_dim 32 for SDXL).
UNetConfig Reduced(bool sdxl) {
  UNetConfig c = sdxl ? SdxlConfig() : Sd15Config();
  if (sdxl) {
    c.block_out_channels = {32, 64, 128};
    c.num_heads = {1, 2, 4};
  } else {
    c.block_out_channels = {32, 64, 128, 128};
  }
  return c;
}

// Random inputs shaped like the config's: latents, 77 text tokens, (SDXL) pooled + time_ids.
Dataset RandomData(const UNetConfig& cfg, int64_t n, int64_t size) {
  Dataset d;
  torch::manual_seed(1);
  d.instance.latents = torch::randn({n, cfg.in_channels, size, size});
  d.instance.text = torch::randn({n, 77, cfg.cross_attention_dim});
  if (cfg.has_text_time()) {
    d.instance.pooled = torch::randn({n, cfg.pooled_dim()});
    float px = float(size * 8);
    d.instance.time_ids = torch::tensor({px, px, 0.f, 0.f, px, px}).repeat({n, 1});
  }
  return d;
}

}  // namespace

int main(int argc, char** argv) {
  bool full = false, sdxl = false;
  int steps = 3, size = 0, rank = 8;
  std::vector<int> batches;
  std::vector<std::string> precisions, checkpointing;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--full") {
      full = true;
    } else if (a == "--sdxl") {
      sdxl = true;
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
      for (char* p = std::strtok(argv[++i], ","); p; p = std::strtok(nullptr, ",")) {
        batches.push_back(std::atoi(p));
      }
    } else {
      std::fprintf(stderr,
                   "usage: bench_train_step [--sdxl] [--full] [--steps N] [--batches 1,4] "
                   "[--size 64] [--rank 8] [--precision no,bf16] [--checkpointing off,on]\n");
      return 64;
    }
  }
  bool sdxl_full = sdxl && full;
  if (size == 0) size = sdxl_full ? 128 : 64;
  if (batches.empty()) batches = sdxl_full ? std::vector<int>{1} : std::vector<int>{1, 4};
  if (checkpointing.empty()) {
    checkpointing =
        sdxl_full ? std::vector<std::string>{"on"} : std::vector<std::string>{"off", "on"};
  }
  UNetConfig cfg = full ? (sdxl ? SdxlConfig() : Sd15Config()) : Reduced(sdxl);
  bool cuda = torch::cuda::is_available();
  TensorMap weights = RandomWeights(cfg, 0);
  int64_t nparams = 0;
  for (const auto& [k, v] : weights) nparams += v.numel();
  const char* name = sdxl ? (full ? "SDXL" : "reduced SDXL (channels 32/64/128)")
                          : (full ? "SD 1.5" : "reduced SD 1.5 (channels 32/64/128/128)");
  std::printf(
      "config: %s UNet, %.1fM parameters, LoRA rank %d, latents %dx%d, device %s, "
      "%d threads, attention %s\n",
      name, double(nparams) / 1e6, rank, size, size, cuda ? "cuda" : "cpu",
      torch::get_num_threads(), AutoAttentionKernelName());
  std::printf(
      "| batch | grad ckpt | precision | s/step | images/s | memory between steps (MiB) | "
      "peak memory (MiB) |\n");
  std::printf("|---:|---|---|---:|---:|---:|---:|\n");
  if (precisions.empty()) {
    precisions = !cuda       ? std::vector<std::string>{"no"}
                 : sdxl_full ? std::vector<std::string>{"bf16"}
                             : std::vector<std::string>{"no", "bf16"};
  }
  for (const std::string& prec : precisions) {
    for (int batch : batches) {
      for (const std::string& ckpt_name : checkpointing) {
        const bool ckpt = ckpt_name == "on";
        Json pj = {{"steps", steps + 1},
                   {"batch_size", batch},
                   {"rank", rank},
                   {"alpha", rank},
                   {"gradient_checkpointing", ckpt},
                   {"mixed_precision", prec},
                   {"checkpoint_every", steps + 1}};
        Result<LoraSdParams> p = LoraSdParams::Parse(pj);
        if (!p.ok()) {
          std::fprintf(stderr, "%s\n", p.status().ToString().c_str());
          return 1;
        }
        auto t = Trainer::Create(cfg, weights, RandomData(cfg, batch * 2, size), *p);
        if (!t.ok()) {
          std::fprintf(stderr, "%s\n", t.status().ToString().c_str());
          return 1;
        }
        Result<double> warm = (*t)->Step();  // warm-up (allocator, kernels)
        if (!warm.ok()) {
          std::fprintf(stderr, "%s\n", warm.status().ToString().c_str());
          return 1;
        }
        // Between steps: weights, LoRA, optimizer state, data (what a step's activations add to).
        double steady = StatusMiB("VmRSS:");
        ResetPeakRss();
#ifdef GLEANER_WITH_CUDA
        if (cuda) {
          c10::cuda::CUDACachingAllocator::resetPeakStats(0);
          auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(0);
          steady = double(stats.allocated_bytes[0].current) / (1 << 20);
        }
#endif
        auto start = std::chrono::steady_clock::now();
        for (int s = 0; s < steps; ++s) {
          if (!(*t)->Step().ok()) return 1;
        }
        if (cuda) torch::cuda::synchronize();
        double secs =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / steps;
        double peak = StatusMiB("VmHWM:");
        const char* what = "RSS";
#ifdef GLEANER_WITH_CUDA
        if (cuda) {
          auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(0);
          peak = double(stats.allocated_bytes[0].peak) / (1 << 20);
          what = "GPU allocated";
        }
#endif
        std::printf("| %d | %s | %s | %.3f | %.2f | %.0f | %.0f (%s) |\n", batch,
                    ckpt ? "on" : "off", prec == "no" ? "fp32" : prec.c_str(), secs, batch / secs,
                    steady, peak, what);
        std::fflush(stdout);
      }
    }
  }
  return 0;
}
