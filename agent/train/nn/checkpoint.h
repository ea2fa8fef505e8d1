// Gradient (activation) checkpointing: trade compute for memory by not keeping a block's
// intermediate activations for backward, and re-running the block in backward instead.
//
// How it works, for a newcomer. Normally autograd keeps every intermediate tensor a block creates
// (attention probabilities, GEGLU halves, ...) until backward has used it; for a big UNet that is
// most of the memory. Checkpointer::Run(block, x, cond) instead
//   forward:  runs block(x, cond) under NoGrad (no graph, so the intermediates are freed at once)
//             and remembers only x, cond and the autocast state;
//   backward: re-runs block(x, cond) WITH grad under the same autocast state, then calls backward
//             through that fresh little graph with the incoming gradient. The gradients land on
//             the block's trainable tensors (LoRA) as usual, and on x / cond when they need them.
// This is PyTorch's `checkpoint(..., use_reentrant=True)`; libtorch 1.13's C++ API has none.
// Recomputation must give the same values as the first run: the block must not draw random
// numbers or change state in forward (our blocks are deterministic; dropout is 0).
//
// One subtlety: when neither x nor cond requires grad (frozen layers before the first LoRA), a
// custom autograd function's outputs would not require grad either and backward would never
// reach the block. A constant scalar that requires grad is passed as a dummy third input, so the
// output always joins the graph.
//
// Contract: Run is a plain call when disabled or when grad mode is off (inference). The block
// must outlive the backward pass. Not thread-safe (one model, one thread).
#pragma once

#include <torch/torch.h>

namespace gleaner::train {

// A block whose forward takes (hidden states, conditioning) and that can be run again.
struct Recomputable {
  virtual ~Recomputable() = default;
  virtual torch::Tensor Run(const torch::Tensor& x, const torch::Tensor& cond) = 0;
};

class Checkpointer {
 public:
  Checkpointer();
  void set_enabled(bool on) { enabled_ = on; }
  bool enabled() const { return enabled_; }
  // block->Run(x, cond), recomputed in backward when enabled and grad mode is on.
  torch::Tensor Run(Recomputable* block, const torch::Tensor& x, const torch::Tensor& cond);

 private:
  bool enabled_ = false;
  torch::Tensor dummy_;  // scalar that requires grad (see above)
};

}  // namespace gleaner::train
