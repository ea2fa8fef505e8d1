#include "agent/train/sampling/sampling_loop.h"

namespace gleaner::train::sampling {

using torch::Tensor;

Tensor Guide(const Tensor& uncond, const Tensor& cond, double guidance_scale) {
  return uncond + guidance_scale * (cond - uncond);
}

DenoiseFn WithGuidance(PairedDenoiseFn paired, double guidance_scale) {
  return [paired = std::move(paired), guidance_scale](const Tensor& x,
                                                      const Tensor& t) -> Result<Tensor> {
    Result<Tensor> out = paired(torch::cat({x, x}), t);  // [2B, C, H, W]
    if (!out.ok()) return out.status();
    if (out->dim() < 1 || out->size(0) != 2 * x.size(0)) {
      return Status::Internal("guided model returned a batch of the wrong size");
    }
    std::vector<Tensor> halves = out->chunk(2);
    return Guide(halves[0], halves[1], guidance_scale);
  };
}

Result<Tensor> Sample(const Scheduler& scheduler, const Tensor& noise, const DenoiseFn& model,
                      const StepObserver& observe) {
  const int64_t n = scheduler.num_inference_steps();
  if (n == 0) return Status::Invalid("sampling: SetTimesteps was not called");
  Tensor x = noise.to(torch::kFloat32) * scheduler.init_noise_sigma();
  for (int64_t i = 0; i < n; ++i) {
    Tensor t = scheduler.timesteps()[i];
    Tensor x_in = scheduler.ScaleModelInput(x, i);
    Result<Tensor> m = model(x_in, t);
    if (!m.ok()) return m.status();
    if (m->sizes() != x.sizes()) {
      return Status::Internal("sampling: the model's output shape differs from the sample's");
    }
    StepOutput s = scheduler.Step(*m, i, x);
    x = s.prev_sample;
    if (observe) observe({i, t, x_in, *m, s.pred_original_sample, x});
  }
  return x;
}

}  // namespace gleaner::train::sampling
