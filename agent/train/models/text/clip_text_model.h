// CLIP text encoders as transformers computes them: CLIPTextModel (SD 1.x, SDXL text_encoder) and
// CLIPTextModelWithProjection (SDXL text_encoder_2), fp32, with LoRA-capable attention
// projections.
//
//   ids [B,T] -> token_embedding + position_embedding[0..T)        [B,T,D]
//   L x { x += out_proj(causal MHA(layer_norm1 x)); x += fc2(act(fc1(layer_norm2 x))) }
//   last_hidden_state        = final_layer_norm(x)                    [B,T,D]
//   penultimate_hidden_state = x entering the last layer, no LN       [B,T,D]  (hidden_states[-2])
//   pooler_output            = last_hidden_state[b, first eos in ids[b]]  [B,D]
//                              (legacy eos_token_id == 2: position of the largest id)
//   text_embeds              = text_projection(pooler_output)         [B,P]  (projection only)
// SD 1.x conditions the UNet on last_hidden_state; SDXL on concat(penultimate of both encoders)
// plus text_embeds of encoder 2.
//
// Contract: parameter names are transformers' state-dict keys (`text_model.…`,
// `text_projection.weight`), so a `model.safetensors` loads as is (the `position_ids` buffer some
// files carry is ignored); base weights are frozen. forward() expects ids that CheckInputIds
// accepted. LoRA: LoraTargets() are q_proj, k_proj, v_proj, out_proj of every layer
// (text_encoder_lora.h). Not thread-safe.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>

#include "agent/train/models/text/clip_text_config.h"
#include "agent/train/nn/lora_adapters.h"
#include "agent/train/nn/torch_io.h"

namespace gleaner::train::text {

struct ClipTextOutput {
  torch::Tensor last_hidden_state;         // [B,T,D]
  torch::Tensor penultimate_hidden_state;  // [B,T,D]
  torch::Tensor pooler_output;             // [B,D]
  torch::Tensor text_embeds;               // [B,P]; undefined without projection
};

class ClipEncoderLayer;

class ClipTextModel : public torch::nn::Module {
 public:
  explicit ClipTextModel(const ClipTextConfig& config);
  ClipTextOutput forward(const torch::Tensor& input_ids);
  LoraAdapters::Targets LoraTargets();
  const ClipTextConfig& config() const { return config_; }

 private:
  ClipTextConfig config_;
  torch::nn::Embedding token_embedding_{nullptr}, position_embedding_{nullptr};
  std::vector<std::shared_ptr<ClipEncoderLayer>> layers_;
  torch::nn::LayerNorm final_layer_norm_{nullptr};
  torch::nn::Linear text_projection_{nullptr};
};

// input_ids: a 2-D integer tensor [B,T] with 1 <= T <= max_position_embeddings and every id in
// [0, vocab_size); the error says which rule failed.
Status CheckInputIds(const ClipTextConfig& config, const torch::Tensor& input_ids);

// Loads transformers weights (all float dtypes, converted to fp32) into a model; frozen.
Status LoadClipTextWeights(ClipTextModel& model, const TensorMap& weights);

// A model from a config.json and a weights file (.safetensors or .safetensors.index.json).
Result<std::shared_ptr<ClipTextModel>> LoadClipTextModel(const std::string& config_path,
                                                         const std::string& weights_path);

}  // namespace gleaner::train::text
