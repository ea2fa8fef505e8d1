#include "agent/train/models/unet/unet.h"

#include <cmath>

#include "agent/train/models/unet/unet_blocks.h"
#include "agent/train/models/unet/unet_lora.h"
#include "agent/train/nn/module_weights.h"

namespace gleaner::train::unet {

namespace nn = torch::nn;
using torch::Tensor;

// diffusers' TimestepEmbedding: linear_1 - SiLU - linear_2. [B,in] -> [B,E]. Used for the time
// embedding and for SDXL's add_embedding.
class TimestepMlp : public nn::Module {
 public:
  TimestepMlp(int64_t in, int64_t dim) {
    linear_1_ = register_module("linear_1", nn::Linear(in, dim));
    linear_2_ = register_module("linear_2", nn::Linear(dim, dim));
  }
  Tensor forward(const Tensor& x) {
    return BaseLinear(linear_2_, torch::silu(BaseLinear(linear_1_, x)));
  }

 private:
  nn::Linear linear_1_{nullptr}, linear_2_{nullptr};
};

DenoiserShape UNet::shape() const {
  return ShapeOf(config_);
}

LoraAdapters UNet::LoraAdaptersFor(const TensorMap* file) {
  return UnetLoraAdapters(*this, file);
}

std::map<std::string, std::string> UNet::LoraFileMetadata() const {
  std::map<std::string, std::string> meta = {{"target_modules", "to_q,to_k,to_v,to_out.0"}};
  if (config_.has_text_time()) {
    // As sd-scripts labels SDXL LoRAs (A1111/Forge list them as SDXL networks).
    meta["ss_base_model_version"] = "sdxl_base_v1-0";
    meta["modelspec.architecture"] = "stable-diffusion-xl-v1-base/lora";
  }
  return meta;
}

UNet::UNet(const UNetConfig& config) : config_(config) {
  Build(/*hollow=*/false);
}

UNet::UNet(const UNetConfig& config, const BasePlacement& placement)
    : config_(config), placement_(placement) {
  Build(/*hollow=*/true);
}

template <class M>
std::shared_ptr<M> UNet::Add(nn::ModuleList* list, const std::string& name, std::shared_ptr<M> m,
                             bool hollow) {
  auto empty = torch::TensorOptions().dtype(placement_.dtype).device(placement_.device);
  for (const auto& p : m->named_parameters(/*recurse=*/true)) {
    shapes_[name + "." + p.key()] = p.value().sizes().vec();
    if (hollow) {
      p.value().set_requires_grad(false);
      p.value().set_data(torch::empty({0}, empty));
    }
  }
  if (list != nullptr) {
    (*list)->push_back(m);
    return m;
  }
  return register_module(name, m);
}

// The module tree in diffusers' order: conv_in, time_embedding, (add_embedding), down_blocks,
// mid_block, up_blocks, conv_norm_out, conv_out.
void UNet::Build(bool hollow) {
  const UNetConfig& c = config_;
  const size_t n = c.block_out_channels.size();
  const int64_t ch0 = c.block_out_channels[0], temb = c.time_embed_dim();
  conv_in_ = nn::Conv2d(Add(nullptr, "conv_in",
                            nn::Conv2d(nn::Conv2dOptions(c.in_channels, ch0, 3).padding(1)).ptr(),
                            hollow));
  time_embedding_ =
      Add(nullptr, "time_embedding", std::make_shared<TimestepMlp>(ch0, temb), hollow);
  if (c.has_text_time()) {
    add_embedding_ =
        Add(nullptr, "add_embedding",
            std::make_shared<TimestepMlp>(c.projection_class_embeddings_input_dim, temb), hollow);
  }
  nn::ModuleList downs;
  register_module("down_blocks", downs);
  for (size_t i = 0; i < n; ++i) {
    int64_t in = c.block_out_channels[i == 0 ? 0 : i - 1];
    down_.push_back(Add(&downs, "down_blocks." + std::to_string(i),
                        std::make_shared<DownBlock>(c, i, in, c.block_out_channels[i]), hollow));
  }
  mid_ = Add(nullptr, "mid_block", std::make_shared<MidBlock>(c), hollow);
  nn::ModuleList ups;
  register_module("up_blocks", ups);
  for (size_t i = 0; i < n; ++i) {
    int64_t prev_out = c.block_out_channels[i == 0 ? n - 1 : n - i];  // the previous up block's
    up_.push_back(Add(&ups, "up_blocks." + std::to_string(i),
                      std::make_shared<UpBlock>(c, i, prev_out), hollow));
  }
  conv_norm_out_ = nn::GroupNorm(Add(
      nullptr, "conv_norm_out",
      nn::GroupNorm(nn::GroupNormOptions(c.norm_num_groups, ch0).eps(c.norm_eps)).ptr(), hollow));
  conv_out_ = nn::Conv2d(Add(nullptr, "conv_out",
                             nn::Conv2d(nn::Conv2dOptions(ch0, c.out_channels, 3).padding(1)).ptr(),
                             hollow));
}

Tensor UNet::forward(const Tensor& sample, const Tensor& timesteps, const Tensor& context,
                     const AddedCond& added) {
  const UNetConfig& c = config_;
  const int64_t b = sample.size(0);
  // 1. Time embedding: t [B] -> sinusoids [B,C0] -> MLP -> temb [B,E].
  Tensor t = timesteps.reshape({-1});
  if (t.size(0) != b) t = t.expand({b});
  Tensor temb = time_embedding_->forward(
      SinusoidalEmbedding(t, c.block_out_channels[0], c.flip_sin_to_cos, c.freq_shift)
          .to(sample.scalar_type()));
  // 2. SDXL (text_time): temb += MLP(cat(text_embeds [B,P], sinusoids(time_ids) [B,6A])).
  if (c.has_text_time()) {
    TORCH_CHECK(added.text_embeds.defined() && added.time_ids.defined(),
                "this UNet (addition_embed_type text_time) needs text_embeds and time_ids");
    TORCH_CHECK(added.text_embeds.dim() == 2 && added.text_embeds.size(0) == b &&
                    added.text_embeds.size(1) == c.pooled_dim(),
                "text_embeds must be [", b, ", ", c.pooled_dim(), "], got ",
                added.text_embeds.sizes());
    TORCH_CHECK(
        added.time_ids.dim() == 2 && added.time_ids.size(0) == b && added.time_ids.size(1) == 6,
        "time_ids must be [", b, ", 6], got ", added.time_ids.sizes());
    Tensor time_embeds = SinusoidalEmbedding(added.time_ids.flatten(), c.addition_time_embed_dim,
                                             c.flip_sin_to_cos, c.freq_shift)
                             .reshape({b, -1});  // [B,6A]
    Tensor add = torch::cat({added.text_embeds, time_embeds}, -1).to(temb.scalar_type());
    temb = temb + add_embedding_->forward(add);  // [B,E]
  } else {
    TORCH_CHECK(!added.text_embeds.defined() && !added.time_ids.defined(),
                "text_embeds/time_ids given, but the UNet config has no addition_embed_type");
  }
  // 3. conv_in, then down blocks (each pushes skips), mid block, up blocks (each pops them).
  BlockInputs in{temb, context, &ckpt_};
  Tensor h = conv_in_->forward(sample);  // [B,C0,H,W]
  std::vector<Tensor> skips = {h};
  for (auto& d : down_) h = d->forward(h, in, &skips);  // ... -> [B,C_last,H/2^(n-1),W/2^(n-1)]
  h = mid_->forward(h, in);
  for (auto& u : up_) h = u->forward(h, in, &skips);                   // ... -> [B,C0,H,W]
  return conv_out_->forward(torch::silu(conv_norm_out_->forward(h)));  // [B,out_channels,H,W]
}

std::vector<std::pair<std::string, LoraLinearImpl*>> UNet::LoraTargets() {
  std::vector<std::pair<std::string, LoraLinearImpl*>> out;
  for (const auto& item : named_modules("", /*include_self=*/false)) {
    if (auto* l = dynamic_cast<LoraLinearImpl*>(item.value().get())) {
      out.emplace_back(item.key(), l);
    }
  }
  return out;
}

Status LoadStateDict(UNet& model, const TensorMap& weights) {
  const BasePlacement& to = model.placement();
  HollowLayout layout{model.parameter_shapes(), to.device, to.dtype, {}};
  if (to.fp8_linear) {
    for (const auto& item : model.named_modules("", /*include_self=*/false)) {
      if (dynamic_cast<LoraLinearImpl*>(item.value().get()) != nullptr ||
          dynamic_cast<nn::LinearImpl*>(item.value().get()) != nullptr) {
        layout.fp8_keys.insert(item.key() + ".weight");
      }
    }
  }
  return LoadHollowModuleWeights(model, layout, weights, "weights");
}

TensorMap RandomWeights(const UNetConfig& config, uint64_t seed) {
  torch::manual_seed(seed);
  UNet model(config);
  TensorMap out;
  // The tensors keep the storage alive after the model is gone: no second copy.
  for (const auto& p : model.named_parameters(true)) out[p.key()] = p.value().detach();
  return out;
}

Tensor SinusoidalEmbedding(const Tensor& t, int64_t dim, bool flip_sin_to_cos, double freq_shift) {
  int64_t half = dim / 2;
  auto f32 = torch::TensorOptions().dtype(torch::kFloat32).device(t.device());
  Tensor exponent = torch::arange(0, half, f32) * float(-std::log(10000.0));
  exponent = exponent / float(double(half) - freq_shift);
  Tensor emb = t.to(torch::kFloat32).unsqueeze(1) * torch::exp(exponent).unsqueeze(0);
  emb = flip_sin_to_cos ? torch::cat({torch::cos(emb), torch::sin(emb)}, -1)
                        : torch::cat({torch::sin(emb), torch::cos(emb)}, -1);
  if (dim % 2 == 1) emb = torch::constant_pad_nd(emb, {0, 1, 0, 0}, 0);
  return emb;  // [N, dim]
}

}  // namespace gleaner::train::unet
