#include "agent/train/sampling/scheduler.h"

#include <cmath>

#include "agent/train/sampling/ddim.h"
#include "agent/train/sampling/euler_discrete.h"

namespace gleaner::train::sampling {

Scheduler::Scheduler(const SchedulerConfig& c) : config_(c) {
  alphas_cumprod_ = AlphasCumprod(c.noise);
}

std::vector<double> Scheduler::SpacedTimesteps(int64_t n, bool round_linspace) const {
  const int64_t train = config_.noise.num_train_timesteps;
  std::vector<double> t(static_cast<size_t>(n), 0.0);
  switch (config_.timestep_spacing) {
    case Spacing::kLeading: {
      // (arange(n) * (train // n)).round()[::-1] + steps_offset
      int64_t ratio = train / n;
      for (int64_t i = 0; i < n; ++i) {
        t[size_t(i)] = double((n - 1 - i) * ratio + config_.steps_offset);
      }
      break;
    }
    case Spacing::kTrailing: {
      // round(arange(train, 0, -train / n)) - 1. numpy fills arange as start + i * delta with
      // delta = (start - step) - start and rounds half to even (nearbyint). numpy's length
      // ceil(train / step) can exceed n by one through rounding (n = 61, 103, ...); diffusers
      // then yields a stray timestep -1, which is not reproduced: exactly n are taken.
      double start = double(train), delta = (start - double(train) / double(n)) - start;
      for (int64_t i = 0; i < n; ++i) t[size_t(i)] = std::nearbyint(start + double(i) * delta) - 1;
      break;
    }
    case Spacing::kLinspace: {
      // linspace(0, train - 1, n)[::-1]: i * step, the last exactly train - 1.
      double stop = double(train - 1), step = n > 1 ? stop / double(n - 1) : 0.0;
      for (int64_t i = 0; i < n; ++i) {
        double v = i == n - 1 && n > 1 ? stop : double(i) * step;
        t[size_t(n - 1 - i)] = round_linspace ? std::nearbyint(v) : v;
      }
      break;
    }
  }
  return t;
}

std::unique_ptr<Scheduler> MakeScheduler(const SchedulerConfig& config) {
  if (config.kind == SamplerKind::kDdim) return std::make_unique<DdimScheduler>(config);
  return std::make_unique<EulerDiscreteScheduler>(config);
}

}  // namespace gleaner::train::sampling
