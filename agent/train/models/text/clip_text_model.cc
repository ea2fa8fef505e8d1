#include "agent/train/models/text/clip_text_model.h"

#include <cmath>

#include "agent/train/nn/attention.h"
#include "agent/train/nn/lora_linear.h"
#include "agent/train/nn/module_weights.h"

namespace gleaner::train::text {

namespace nn = torch::nn;
using torch::Tensor;

namespace {

// A module that only groups children under a name ("text_model", "encoder", "self_attn", ...),
// so parameter paths are transformers' keys.
std::shared_ptr<nn::Module> Group(nn::Module& parent, const std::string& name) {
  return parent.register_module(name, std::make_shared<nn::Module>());
}

nn::LayerNorm LN(int64_t dim, double eps) {
  return nn::LayerNorm(nn::LayerNormOptions({dim}).eps(eps));
}

}  // namespace

// One pre-LN transformer layer: causal self-attention, then the MLP, each with a residual.
class ClipEncoderLayer : public nn::Module {
 public:
  explicit ClipEncoderLayer(const ClipTextConfig& c)
      : heads_(c.num_attention_heads), act_(c.hidden_act) {
    const int64_t d = c.hidden_size;
    auto attn = Group(*this, "self_attn");
    q_proj = attn->register_module("q_proj", std::make_shared<LoraLinearImpl>(d, d, true));
    k_proj = attn->register_module("k_proj", std::make_shared<LoraLinearImpl>(d, d, true));
    v_proj = attn->register_module("v_proj", std::make_shared<LoraLinearImpl>(d, d, true));
    out_proj = attn->register_module("out_proj", std::make_shared<LoraLinearImpl>(d, d, true));
    layer_norm1 = register_module("layer_norm1", LN(d, c.layer_norm_eps));
    auto mlp = Group(*this, "mlp");
    fc1 = mlp->register_module("fc1", nn::Linear(d, c.intermediate_size));
    fc2 = mlp->register_module("fc2", nn::Linear(c.intermediate_size, d));
    layer_norm2 = register_module("layer_norm2", LN(d, c.layer_norm_eps));
  }

  Tensor forward(Tensor x) {  // [B,T,D]
    const double scale = 1.0 / std::sqrt(double(x.size(2) / heads_));
    Tensor h = layer_norm1(x);
    Tensor a = MultiHeadAttention(q_proj->forward(h), k_proj->forward(h), v_proj->forward(h),
                                  {heads_, scale, /*upcast=*/false, /*causal=*/true});
    x = x + out_proj->forward(a);
    h = fc1(layer_norm2(x));  // [B,T,I]
    h = act_ == ClipActivation::kQuickGelu ? h * torch::sigmoid(1.702 * h) : torch::gelu(h);
    return x + fc2(h);
  }

  std::shared_ptr<LoraLinearImpl> q_proj, k_proj, v_proj, out_proj;
  nn::LayerNorm layer_norm1{nullptr}, layer_norm2{nullptr};
  nn::Linear fc1{nullptr}, fc2{nullptr};

 private:
  int64_t heads_;
  ClipActivation act_;
};

ClipTextModel::ClipTextModel(const ClipTextConfig& c) : config_(c) {
  auto text_model = Group(*this, "text_model");
  auto embeddings = Group(*text_model, "embeddings");
  token_embedding_ =
      embeddings->register_module("token_embedding", nn::Embedding(c.vocab_size, c.hidden_size));
  position_embedding_ = embeddings->register_module(
      "position_embedding", nn::Embedding(c.max_position_embeddings, c.hidden_size));
  nn::ModuleList layers;
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    layers_.push_back(std::make_shared<ClipEncoderLayer>(c));
    layers->push_back(layers_.back());
  }
  Group(*text_model, "encoder")->register_module("layers", layers);
  final_layer_norm_ =
      text_model->register_module("final_layer_norm", LN(c.hidden_size, c.layer_norm_eps));
  if (c.with_projection) {
    text_projection_ =
        register_module("text_projection",
                        nn::Linear(nn::LinearOptions(c.hidden_size, c.projection_dim).bias(false)));
  }
}

ClipTextOutput ClipTextModel::forward(const Tensor& input_ids) {
  const int64_t batch = input_ids.size(0), len = input_ids.size(1);
  Tensor ids = input_ids.to(torch::kLong);
  Tensor positions = torch::arange(len, ids.options());
  Tensor x = token_embedding_(ids) + position_embedding_(positions);  // [B,T,D]
  ClipTextOutput out;
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (i + 1 == layers_.size()) out.penultimate_hidden_state = x;
    x = layers_[i]->forward(x);
  }
  out.last_hidden_state = final_layer_norm_(x);
  // transformers takes argmax(ids) (legacy configs, eos_token_id 2) or argmax(ids == eos), i.e.
  // the FIRST position holding the largest value (0 when a row has no eos). libtorch's argmax
  // does not promise the first of tied maxima on every build and thread count, so the key below
  // has no ties: value * len + (len - 1 - position).
  Tensor rev = (len - 1) - positions;  // [T]
  Tensor key = config_.eos_token_id == 2 ? ids : (ids == config_.eos_token_id).to(torch::kLong);
  Tensor eos_pos = (key * len + rev).argmax(-1);  // [B]
  out.pooler_output = out.last_hidden_state.index(
      {torch::arange(batch, eos_pos.options().dtype(torch::kLong)), eos_pos});
  if (text_projection_) out.text_embeds = text_projection_(out.pooler_output);
  return out;
}

LoraAdapters::Targets ClipTextModel::LoraTargets() {
  LoraAdapters::Targets t;
  for (size_t i = 0; i < layers_.size(); ++i) {
    const std::string p = "text_model.encoder.layers." + std::to_string(i) + ".self_attn.";
    t.emplace_back(p + "q_proj", layers_[i]->q_proj.get());
    t.emplace_back(p + "k_proj", layers_[i]->k_proj.get());
    t.emplace_back(p + "v_proj", layers_[i]->v_proj.get());
    t.emplace_back(p + "out_proj", layers_[i]->out_proj.get());
  }
  return t;
}

Status CheckInputIds(const ClipTextConfig& config, const Tensor& ids) {
  return CatchTorch("input_ids", [&]() -> Status {
    if (ids.dim() != 2 || ids.is_floating_point() || ids.scalar_type() == torch::kBool) {
      return Status::Invalid("input_ids must be a 2-D integer tensor [batch, tokens]");
    }
    if (ids.size(0) < 1 || ids.size(1) < 1 || ids.size(1) > config.max_position_embeddings) {
      return Status::Invalid("input_ids must have 1 to " +
                             std::to_string(config.max_position_embeddings) + " tokens per row");
    }
    int64_t lo = ids.min().item<int64_t>(), hi = ids.max().item<int64_t>();
    if (lo < 0 || hi >= config.vocab_size) {
      return Status::Invalid("input_ids: id " + std::to_string(lo < 0 ? lo : hi) +
                             " is outside the vocabulary [0, " + std::to_string(config.vocab_size) +
                             ")");
    }
    return Status::Ok();
  });
}

Status LoadClipTextWeights(ClipTextModel& model, const TensorMap& weights) {
  return LoadModuleWeights(model, weights, "text encoder weights",
                           {"text_model.embeddings.position_ids"});
}

Result<std::shared_ptr<ClipTextModel>> LoadClipTextModel(const std::string& config_path,
                                                         const std::string& weights_path) {
  Result<ClipTextConfig> config = LoadClipTextConfig(config_path);
  if (!config.ok()) return config.status();
  Result<TensorMap> weights = LoadWeights(weights_path);
  if (!weights.ok()) return weights.status();
  std::shared_ptr<ClipTextModel> model;
  GLEANER_RETURN_IF_ERROR(CatchTorch("building the text encoder", [&]() -> Status {
    model = std::make_shared<ClipTextModel>(*config);
    return Status::Ok();
  }));
  Status s = LoadClipTextWeights(*model, *weights);
  if (!s.ok()) return Status::Invalid(weights_path + ": " + s.message());
  model->eval();
  return model;
}

}  // namespace gleaner::train::text
