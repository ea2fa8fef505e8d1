// The T5 v1.1 encoder (transformers' T5EncoderModel with feed_forward_proj "gated-gelu"): FLUX.1's
// text_encoder_2, whose last_hidden_state conditions the transformer.
//
//   ids [B,T] -> shared (token embedding)                                 [B,T,D]
//   bias = relative_attention_bias(bucket(k - q)) of block 0              [1,H,T,T]
//   L x { x += o(softmax(q k^T + bias) v) of rms_norm(x)          (no 1/sqrt(d_kv) scaling)
//         x += wo(gelu_tanh(wi_0 h) * wi_1 h), h = rms_norm(x) }
//   last_hidden_state = final_layer_norm(x)                                [B,T,D]
// RMS norm: x * rsqrt(mean(x^2) + eps) computed in fp32, cast to the weight's dtype, times the
// weight. No attention mask (FluxPipeline pads to max_sequence_length and passes ids only). In
// fp16 the residual stream is clamped where it overflowed, as transformers does.
//
// Contract: parameter names are transformers' state-dict keys (`shared.weight`,
// `encoder.block.N.layer.0.SelfAttention.q.weight`, ...), so a `model.safetensors` (or a sharded
// index) loads as is; `encoder.embed_tokens.weight` (the tied copy some files carry) is accepted
// in place of, or next to, `shared.weight`. Base weights are frozen and live where a
// BasePlacement says (device; fp32, bf16 or fp16; optionally the Linear weights in fp8, upcast per
// layer). forward() expects ids that CheckT5InputIds accepted and runs in the placement's dtype;
// attention goes through nn/attention.h (fused or explicit kernel, scores and softmax in fp32).
// Not thread-safe.
#pragma once

#include <torch/torch.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "agent/train/models/text/t5_config.h"
#include "agent/train/nn/placement.h"
#include "agent/train/nn/torch_io.h"

namespace gleaner::train::text {

class T5Block;
class T5RmsNorm;

class T5Encoder : public torch::nn::Module {
 public:
  // Default-initialised fp32 CPU weights (tests).
  explicit T5Encoder(const T5Config& config);
  // Parameters without storage, to be filled by LoadT5Weights on `placement` (at most one block's
  // default init exists at a time while building).
  T5Encoder(const T5Config& config, const BasePlacement& placement);

  // input_ids [B,T] integer -> last_hidden_state [B,T,d_model] in the placement's dtype.
  torch::Tensor forward(const torch::Tensor& input_ids);

  const T5Config& config() const { return config_; }
  const BasePlacement& placement() const { return placement_; }
  // Shape of every parameter by state-dict key (also before LoadT5Weights fills them).
  const std::map<std::string, std::vector<int64_t>>& parameter_shapes() const { return shapes_; }

 private:
  void Build(bool hollow);

  T5Config config_;
  BasePlacement placement_;
  std::map<std::string, std::vector<int64_t>> shapes_;
  torch::nn::Embedding shared_{nullptr};
  torch::nn::Embedding relative_attention_bias_{nullptr};  // block 0's
  std::vector<std::shared_ptr<T5Block>> blocks_;
  std::shared_ptr<T5RmsNorm> final_layer_norm_;
};

// The bidirectional relative-position bucket of every (query, key) pair of a T-token sequence:
// transformers' T5Attention._relative_position_bucket(k - q, bidirectional=True, num_buckets,
// max_distance), [T,T] int64 on `device`.
torch::Tensor RelativePositionBuckets(int64_t tokens, int64_t num_buckets, int64_t max_distance,
                                      const torch::Device& device = torch::kCPU);

// The shape of every parameter a config implies, by state-dict key (what parameter_shapes() of a
// model built from it holds), without building anything.
std::map<std::string, std::vector<int64_t>> T5ParameterShapes(const T5Config& config);

// input_ids: a 2-D integer tensor [B,T] with T >= 1 and every id in [0, vocab_size); the error
// says which rule failed.
Status CheckT5InputIds(const T5Config& config, const torch::Tensor& input_ids);

// Loads transformers weights (F32/F16/BF16, converted to the placement's dtype and device one
// tensor at a time) and freezes them. Missing, unexpected or mis-shaped keys are one error naming
// them; fp8 placement on a libtorch without float8_e4m3fn is one clear error.
Status LoadT5Weights(T5Encoder& model, const TensorMap& weights);

// A frozen encoder from a config.json and a weights file (.safetensors or .safetensors.index.json)
// on `placement`; errors name the file. The file is checked against the config's shapes before
// the model is built, so a config that does not fit its weights never allocates.
Result<std::shared_ptr<T5Encoder>> LoadT5Encoder(const std::string& config_path,
                                                 const std::string& weights_path,
                                                 const BasePlacement& placement = {});

}  // namespace gleaner::train::text
