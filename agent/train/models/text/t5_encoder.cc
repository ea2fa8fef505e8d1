#include "agent/train/models/text/t5_encoder.h"

#include <cmath>

#include "agent/train/nn/attention.h"
#include "agent/train/nn/lora_linear.h"
#include "agent/train/nn/module_weights.h"
#include "agent/train/nn/torch_compat.h"

namespace gleaner::train::text {

namespace nn = torch::nn;
using torch::Tensor;

namespace {

// A module that only groups children under a name ("encoder", "DenseReluDense"), so parameter
// paths are transformers' keys.
std::shared_ptr<nn::Module> Group(nn::Module& parent, const std::string& name) {
  return parent.register_module(name, std::make_shared<nn::Module>());
}

std::shared_ptr<LoraLinearImpl> Proj(nn::Module& parent, const std::string& name, int64_t in,
                                     int64_t out) {
  return parent.register_module(name, std::make_shared<LoraLinearImpl>(in, out, /*bias=*/false));
}

// transformers' fp16 guard after each sub-layer: where the residual stream overflowed, clamp it
// to the largest finite fp16 value minus 1000 (a no-op otherwise, and for other dtypes).
Tensor ClampFp16(const Tensor& x) {
  if (x.scalar_type() != torch::kHalf) return x;
  const double max = 65504.0;
  Tensor limit = torch::where(torch::isinf(x).any(), torch::scalar_tensor(max - 1000, x.options()),
                              torch::scalar_tensor(max, x.options()));
  return torch::max(torch::min(x, limit), -limit);
}

// The token embedding under either of its names (tied copies: shared.weight wins).
TensorMap WithTransformersNames(const TensorMap& weights) {
  TensorMap named = weights;
  const std::string tied = "encoder.embed_tokens.weight";
  if (auto it = named.find(tied); it != named.end()) {
    if (!named.count("shared.weight")) named["shared.weight"] = it->second;
    named.erase(tied);
  }
  return named;
}

constexpr const char* kWhat = "T5 encoder weights";

}  // namespace

// T5LayerNorm: RMS norm without mean subtraction or bias, in fp32.
class T5RmsNorm : public nn::Module {
 public:
  T5RmsNorm(int64_t dim, double eps) : eps_(eps) {
    weight = register_parameter("weight", torch::ones({dim}));
  }
  Tensor forward(const Tensor& x) {
    Tensor h = x.to(torch::kFloat32);
    h = h * torch::rsqrt(h.pow(2).mean(-1, /*keepdim=*/true) + eps_);
    if (weight.scalar_type() == torch::kHalf || weight.scalar_type() == torch::kBFloat16) {
      h = h.to(weight.scalar_type());
    }
    return weight * h;
  }
  Tensor weight;

 private:
  double eps_;
};

// layer.0: x + o(attention(rms_norm(x)) + position bias), unscaled scores.
class T5SelfAttentionLayer : public nn::Module {
 public:
  T5SelfAttentionLayer(const T5Config& c, bool has_bias) : heads_(c.num_heads) {
    auto attn = Group(*this, "SelfAttention");
    const int64_t d = c.d_model, inner = c.inner_dim();
    q = Proj(*attn, "q", d, inner);
    k = Proj(*attn, "k", d, inner);
    v = Proj(*attn, "v", d, inner);
    o = Proj(*attn, "o", inner, d);
    if (has_bias) {
      relative_attention_bias = attn->register_module(
          "relative_attention_bias", nn::Embedding(c.relative_attention_num_buckets, c.num_heads));
    }
    layer_norm =
        register_module("layer_norm", std::make_shared<T5RmsNorm>(d, c.layer_norm_epsilon));
  }
  Tensor forward(const Tensor& x, const Tensor& position_bias) {
    Tensor h = layer_norm->forward(x);
    AttentionOptions options;
    options.heads = heads_;
    options.scale = 1.0;    // T5 folds 1/sqrt(d_kv) into its initialisation
    options.upcast = true;  // unscaled scores: keep them and the softmax in fp32
    options.bias = position_bias;
    Tensor a = MultiHeadAttention(q->forward(h), k->forward(h), v->forward(h), options);
    return x + o->forward(a);
  }
  std::shared_ptr<LoraLinearImpl> q, k, v, o;
  nn::Embedding relative_attention_bias{nullptr};
  std::shared_ptr<T5RmsNorm> layer_norm;

 private:
  int64_t heads_;
};

// layer.1: x + wo(gelu_tanh(wi_0 h) * wi_1 h), h = rms_norm(x) (T5DenseGatedActDense).
class T5FeedForwardLayer : public nn::Module {
 public:
  explicit T5FeedForwardLayer(const T5Config& c) {
    auto ff = Group(*this, "DenseReluDense");
    wi_0 = Proj(*ff, "wi_0", c.d_model, c.d_ff);
    wi_1 = Proj(*ff, "wi_1", c.d_model, c.d_ff);
    wo = Proj(*ff, "wo", c.d_ff, c.d_model);
    layer_norm =
        register_module("layer_norm", std::make_shared<T5RmsNorm>(c.d_model, c.layer_norm_epsilon));
  }
  Tensor forward(const Tensor& x) {
    Tensor h = layer_norm->forward(x);
    Tensor gated = torch::gelu(wi_0->forward(h), "tanh") * wi_1->forward(h);  // gelu_new
    return x + wo->forward(gated);
  }
  std::shared_ptr<LoraLinearImpl> wi_0, wi_1, wo;
  std::shared_ptr<T5RmsNorm> layer_norm;
};

class T5Block : public nn::Module {
 public:
  T5Block(const T5Config& c, bool has_bias) {
    attention = std::make_shared<T5SelfAttentionLayer>(c, has_bias);
    ff = std::make_shared<T5FeedForwardLayer>(c);
    nn::ModuleList layer;
    layer->push_back(attention);
    layer->push_back(ff);
    register_module("layer", layer);
  }
  Tensor forward(const Tensor& x, const Tensor& position_bias) {
    return ClampFp16(ff->forward(ClampFp16(attention->forward(x, position_bias))));
  }
  std::shared_ptr<T5SelfAttentionLayer> attention;
  std::shared_ptr<T5FeedForwardLayer> ff;
};

T5Encoder::T5Encoder(const T5Config& config) : config_(config) {
  Build(/*hollow=*/false);
}

T5Encoder::T5Encoder(const T5Config& config, const BasePlacement& placement)
    : config_(config), placement_(placement) {
  Build(/*hollow=*/true);
}

void T5Encoder::Build(bool hollow) {
  const T5Config& c = config_;
  auto empty = torch::TensorOptions().dtype(placement_.dtype).device(placement_.device);
  // Records a freshly built child's parameter shapes under `prefix` and, when hollow, frees them.
  auto record = [&](nn::Module& m, const std::string& prefix) {
    for (const auto& p : m.named_parameters(/*recurse=*/true)) {
      shapes_[prefix + p.key()] = p.value().sizes().vec();
      if (hollow) {
        p.value().set_requires_grad(false);
        p.value().set_data(torch::empty({0}, empty));
      }
    }
  };
  shared_ = register_module("shared", nn::Embedding(c.vocab_size, c.d_model));
  record(*shared_, "shared.");
  auto encoder = Group(*this, "encoder");
  nn::ModuleList block;
  for (int64_t i = 0; i < c.num_layers; ++i) {
    blocks_.push_back(std::make_shared<T5Block>(c, /*has_bias=*/i == 0));
    record(*blocks_.back(), "encoder.block." + std::to_string(i) + ".");
    block->push_back(blocks_.back());
  }
  encoder->register_module("block", block);
  relative_attention_bias_ = blocks_[0]->attention->relative_attention_bias;
  final_layer_norm_ = encoder->register_module(
      "final_layer_norm", std::make_shared<T5RmsNorm>(c.d_model, c.layer_norm_epsilon));
  record(*final_layer_norm_, "encoder.final_layer_norm.");
}

Tensor T5Encoder::forward(const Tensor& input_ids) {
  Tensor ids = input_ids.to(shared_->weight.device(), torch::kLong);
  Tensor x = shared_(ids);  // [B,T,D]
  Tensor buckets = RelativePositionBuckets(ids.size(1), config_.relative_attention_num_buckets,
                                           config_.relative_attention_max_distance, ids.device());
  // Block 0's table serves every layer: [T,T,H] -> [1,H,T,T].
  Tensor bias = relative_attention_bias_(buckets).permute({2, 0, 1}).unsqueeze(0);
  for (auto& b : blocks_) x = b->forward(x, bias);
  return final_layer_norm_->forward(x);
}

Tensor RelativePositionBuckets(int64_t tokens, int64_t num_buckets, int64_t max_distance,
                               const torch::Device& device) {
  auto longs = torch::TensorOptions().dtype(torch::kLong).device(device);
  Tensor position = torch::arange(tokens, longs);
  Tensor relative = position.unsqueeze(0) - position.unsqueeze(1);  // [q,k] = k - q
  const int64_t half = num_buckets / 2, max_exact = half / 2;
  Tensor buckets = (relative > 0).to(torch::kLong) * half;
  relative = relative.abs();
  // Offsets from max_exact on are log-spaced up to max_distance (the same float32 ops as
  // transformers; the clamp only keeps log(0) out of the branch `where` discards).
  Tensor large = (torch::log(relative.clamp_min(1).to(torch::kFloat32) / max_exact) /
                  std::log(double(max_distance) / double(max_exact)) * (half - max_exact))
                     .to(torch::kLong) +
                 max_exact;
  large = large.clamp_max(half - 1);
  return buckets + torch::where(relative < max_exact, relative, large);
}

std::map<std::string, std::vector<int64_t>> T5ParameterShapes(const T5Config& c) {
  const int64_t d = c.d_model, inner = c.inner_dim(), ff = c.d_ff;
  std::map<std::string, std::vector<int64_t>> s;
  s["shared.weight"] = {c.vocab_size, d};
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string b = "encoder.block." + std::to_string(i) + ".layer.";
    for (const char* p : {"q", "k", "v"}) s[b + "0.SelfAttention." + p + ".weight"] = {inner, d};
    s[b + "0.SelfAttention.o.weight"] = {d, inner};
    if (i == 0) {
      s[b + "0.SelfAttention.relative_attention_bias.weight"] = {c.relative_attention_num_buckets,
                                                                 c.num_heads};
    }
    s[b + "0.layer_norm.weight"] = {d};
    s[b + "1.DenseReluDense.wi_0.weight"] = {ff, d};
    s[b + "1.DenseReluDense.wi_1.weight"] = {ff, d};
    s[b + "1.DenseReluDense.wo.weight"] = {d, ff};
    s[b + "1.layer_norm.weight"] = {d};
  }
  s["encoder.final_layer_norm.weight"] = {d};
  return s;
}

Status CheckT5InputIds(const T5Config& config, const Tensor& ids) {
  return CatchTorch("input_ids", [&]() -> Status {
    if (ids.dim() != 2 || ids.is_floating_point() || ids.scalar_type() == torch::kBool ||
        ids.is_complex()) {
      return Status::Invalid("input_ids must be a 2-D integer tensor [batch, tokens]");
    }
    if (ids.size(0) < 1 || ids.size(1) < 1) {
      return Status::Invalid("input_ids must have at least one row and one token");
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

Status LoadT5Weights(T5Encoder& model, const TensorMap& weights) {
  const BasePlacement& to = model.placement();
  if (to.dtype != torch::kFloat32 && to.dtype != torch::kBFloat16 && to.dtype != torch::kFloat16) {
    return Status::Invalid("T5 encoder weights: the base dtype must be F32, BF16 or F16");
  }
  if (to.fp8_linear && !kHasFp8) {
    return Status::Invalid(
        "T5 encoder weights: fp8 base weights need libtorch 2.1 or newer (this "
        "is " TORCH_VERSION ")");
  }
  HollowLayout layout{model.parameter_shapes(), to.device, to.dtype, {}};
  if (to.fp8_linear) {
    for (const auto& item : model.named_modules("", /*include_self=*/false)) {
      if (dynamic_cast<LoraLinearImpl*>(item.value().get()) != nullptr) {
        layout.fp8_keys.insert(item.key() + ".weight");
      }
    }
  }
  return LoadHollowModuleWeights(model, layout, WithTransformersNames(weights), kWhat);
}

Result<std::shared_ptr<T5Encoder>> LoadT5Encoder(const std::string& config_path,
                                                 const std::string& weights_path,
                                                 const BasePlacement& placement) {
  Result<T5Config> config = LoadT5Config(config_path);
  if (!config.ok()) return config.status();
  Result<TensorMap> weights = LoadWeights(weights_path);
  if (!weights.ok()) return weights.status();
  Status fits =
      CheckWeightShapes(T5ParameterShapes(*config), WithTransformersNames(*weights), kWhat);
  if (!fits.ok()) return Status::Invalid(weights_path + ": " + fits.message());
  std::shared_ptr<T5Encoder> model;
  GLEANER_RETURN_IF_ERROR(CatchTorch("building the T5 encoder", [&]() -> Status {
    model = std::make_shared<T5Encoder>(*config, placement);
    return Status::Ok();
  }));
  Status s = LoadT5Weights(*model, *weights);
  if (!s.ok()) return Status::Invalid(weights_path + ": " + s.message());
  model->eval();
  return model;
}

}  // namespace gleaner::train::text
