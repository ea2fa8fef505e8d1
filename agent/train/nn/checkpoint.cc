#include "agent/train/nn/checkpoint.h"

#include "agent/train/nn/torch_compat.h"

namespace gleaner::train {
namespace {

using torch::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The autocast state (CUDA and CPU) in effect when a block first ran, so that its recomputation
// in backward produces the same dtypes and values.
struct AutocastState {
  bool gpu = false, cpu = false;
  at::ScalarType gpu_dtype = at::kHalf, cpu_dtype = at::kBFloat16;

  static AutocastState Current() {
    return {AutocastEnabled(c10::kCUDA), AutocastEnabled(c10::kCPU), AutocastDtype(c10::kCUDA),
            AutocastDtype(c10::kCPU)};
  }
  void Apply() const {
    SetAutocastEnabled(c10::kCUDA, gpu);
    SetAutocastEnabled(c10::kCPU, cpu);
    SetAutocastDtype(c10::kCUDA, gpu_dtype);
    SetAutocastDtype(c10::kCPU, cpu_dtype);
  }
  void Save(AutogradContext* ctx) const {
    ctx->saved_data["ac_gpu"] = gpu;
    ctx->saved_data["ac_cpu"] = cpu;
    ctx->saved_data["ac_gpu_dtype"] = int64_t(gpu_dtype);
    ctx->saved_data["ac_cpu_dtype"] = int64_t(cpu_dtype);
  }
  static AutocastState Load(AutogradContext* ctx) {
    return {ctx->saved_data["ac_gpu"].toBool(), ctx->saved_data["ac_cpu"].toBool(),
            at::ScalarType(ctx->saved_data["ac_gpu_dtype"].toInt()),
            at::ScalarType(ctx->saved_data["ac_cpu_dtype"].toInt())};
  }
};

// forward(x, cond, dummy, block) -> {block(x, cond)}; see checkpoint.h for the idea.
class CheckpointFunction : public torch::autograd::Function<CheckpointFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, Tensor x, Tensor cond, Tensor dummy,
                               int64_t block) {
    (void)dummy;
    ctx->saved_data["block"] = block;
    ctx->saved_data["x_grad"] = x.requires_grad();
    ctx->saved_data["cond_grad"] = cond.defined() && cond.requires_grad();
    AutocastState::Current().Save(ctx);
    ctx->save_for_backward({x, cond});
    torch::NoGradGuard no_grad;  // 1. run without building a graph: intermediates are freed now
    return {reinterpret_cast<Recomputable*>(block)->Run(x, cond)};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_out) {
    auto* block = reinterpret_cast<Recomputable*>(ctx->saved_data["block"].toInt());
    bool x_grad = ctx->saved_data["x_grad"].toBool();
    bool cond_grad = ctx->saved_data["cond_grad"].toBool();
    variable_list saved = ctx->get_saved_variables();
    // 2. fresh leaves for the inputs, so their gradients can be read after the local backward.
    Tensor x = saved[0].detach().requires_grad_(x_grad);
    Tensor cond = saved[1].defined() ? saved[1].detach().requires_grad_(cond_grad) : saved[1];
    // 3. re-run with grad, under the autocast state of the first run.
    torch::AutoGradMode grad_on(true);
    AutocastState outer = AutocastState::Current();
    AutocastState::Load(ctx).Apply();
    Tensor out = block->Run(x, cond);
    outer.Apply();
    // 4. back-propagate the incoming gradient through the recomputed graph.
    if (out.requires_grad()) torch::autograd::backward({out}, {grad_out[0]});
    return {x_grad ? x.grad() : Tensor(), cond_grad ? cond.grad() : Tensor(), Tensor(), Tensor()};
  }
};

}  // namespace

Checkpointer::Checkpointer() : dummy_(torch::zeros({}, torch::requires_grad())) {}

Tensor Checkpointer::Run(Recomputable* block, const Tensor& x, const Tensor& cond) {
  if (!enabled_ || !torch::GradMode::is_enabled()) return block->Run(x, cond);
  return CheckpointFunction::apply(x, cond, dummy_, reinterpret_cast<int64_t>(block))[0];
}

}  // namespace gleaner::train
