// UNet2DConditionModel (SD 1.x/2.x family) in libtorch, with LoRA-capable attention projections.
//
// Contract: parameter names are exactly diffusers' state-dict keys, so LoadStateDict takes a
// diffusers safetensors file as is. The base weights are frozen after loading (requires_grad
// false); only LoRA tensors (see lora.h) are trained. Forward matches diffusers' AttnProcessor
// math (baddbmm with scale head_dim^-0.5, softmax, GEGLU feed-forward). Not thread-safe.
#pragma once

#include <torch/torch.h>

#include <string>
#include <utility>
#include <vector>

#include "agent/train/lora_sd/unet_config.h"
#include "agent/train/nn/lora_linear.h"
#include "agent/train/nn/torch_io.h"

namespace gleaner::train::lora_sd {

// A module whose forward takes (hidden, conditioning) and that can be recomputed in backward.
struct Recomputable {
  virtual ~Recomputable() = default;
  virtual torch::Tensor Run(const torch::Tensor& x, const torch::Tensor& cond) = 0;
};

class DownBlock;
class UpBlock;
class MidBlock;

class UNet : public torch::nn::Module {
 public:
  explicit UNet(const UNetConfig& config);
  // sample [B,C,H,W], timesteps [B] (or [] / [1], broadcast), encoder_hidden_states [B,T,D].
  torch::Tensor forward(const torch::Tensor& sample, const torch::Tensor& timesteps,
                        const torch::Tensor& encoder_hidden_states);
  // Recompute resnets and transformers in backward instead of keeping their activations.
  void set_gradient_checkpointing(bool on) { checkpointing_ = on; }
  // Every LoRA target (to_q, to_k, to_v, to_out.0 of every attention) by module path.
  std::vector<std::pair<std::string, LoraLinearImpl*>> LoraTargets();
  const UNetConfig& config() const { return config_; }
  // Runs x through m, recomputing it in backward when checkpointing is on and grads are needed.
  torch::Tensor Call(Recomputable* m, const torch::Tensor& x, const torch::Tensor& cond);

 private:
  UNetConfig config_;
  bool checkpointing_ = false;
  torch::Tensor ckpt_dummy_;  // requires grad, so checkpointed outputs require grad
  torch::nn::Conv2d conv_in_{nullptr}, conv_out_{nullptr};
  torch::nn::Linear time_linear_1_{nullptr}, time_linear_2_{nullptr};
  torch::nn::GroupNorm conv_norm_out_{nullptr};
  std::vector<std::shared_ptr<DownBlock>> down_;
  std::vector<std::shared_ptr<UpBlock>> up_;
  std::shared_ptr<MidBlock> mid_;
};

// Copies weights into the model (converting F16/BF16 to the parameter dtype) and freezes them.
// Missing, unexpected and mis-shaped keys are errors that name the keys.
Status LoadStateDict(UNet& model, const TensorMap& weights);
// Deterministic random weights for a config (default init from a fixed seed), keyed like
// diffusers' state dict: for tests, benchmarks and demos without a real checkpoint.
TensorMap RandomWeights(const UNetConfig& config, uint64_t seed);
// Sinusoidal timestep embedding as diffusers' get_timestep_embedding (max_period 10000).
torch::Tensor TimestepEmbedding(const torch::Tensor& timesteps, int64_t dim, bool flip_sin_to_cos,
                                double freq_shift);

}  // namespace gleaner::train::lora_sd
