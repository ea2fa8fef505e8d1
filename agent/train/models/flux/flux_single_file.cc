#include "agent/train/models/flux/flux_single_file.h"

#include <map>
#include <set>

#include "agent/train/nn/torch_compat.h"

namespace gleaner::train::flux {
namespace {

const std::string kPrefix = "model.diffusion_model.";

// torch::cat on dim 0, also for fp8 tensors (concatenated as bytes: not every libtorch has a
// float8 cat).
torch::Tensor Cat(const std::vector<torch::Tensor>& parts) {
  if (parts.empty() || !IsFp8(parts[0])) return torch::cat(parts, 0);
  std::vector<torch::Tensor> bytes;
  for (const torch::Tensor& t : parts) bytes.push_back(t.view(torch::kUInt8));
  return torch::cat(bytes, 0).view(parts[0].scalar_type());
}

bool StartsWith(const std::string& s, const std::string& start) {
  return s.rfind(start, 0) == 0;
}

// The prefix a single file's transformer keys carry ("" or kPrefix).
std::string PrefixOf(const TensorMap& w) {
  return w.count(kPrefix + "img_in.weight") ? kPrefix : "";
}

// Plain renames outside the blocks (diffusers, single file); the final modulation is swapped.
const std::vector<std::pair<std::string, std::string>>& TopRenames() {
  static const std::vector<std::pair<std::string, std::string>> k = {
      {"x_embedder", "img_in"},
      {"context_embedder", "txt_in"},
      {"time_text_embed.timestep_embedder.linear_1", "time_in.in_layer"},
      {"time_text_embed.timestep_embedder.linear_2", "time_in.out_layer"},
      {"time_text_embed.text_embedder.linear_1", "vector_in.in_layer"},
      {"time_text_embed.text_embedder.linear_2", "vector_in.out_layer"},
      {"time_text_embed.guidance_embedder.linear_1", "guidance_in.in_layer"},
      {"time_text_embed.guidance_embedder.linear_2", "guidance_in.out_layer"},
      {"proj_out", "final_layer.linear"}};
  return k;
}

// The q/k RMS norm scales: (diffusers weight, single-file scale), per block.
std::vector<std::pair<std::string, std::string>> NormRenames(const FluxConfig& c) {
  std::vector<std::pair<std::string, std::string>> out;
  for (int i = 0; i < c.num_layers; ++i) {
    std::string t = "transformer_blocks." + std::to_string(i) + ".attn.";
    std::string o = "double_blocks." + std::to_string(i) + ".";
    out.push_back({t + "norm_q.weight", o + "img_attn.norm.query_norm.scale"});
    out.push_back({t + "norm_k.weight", o + "img_attn.norm.key_norm.scale"});
    out.push_back({t + "norm_added_q.weight", o + "txt_attn.norm.query_norm.scale"});
    out.push_back({t + "norm_added_k.weight", o + "txt_attn.norm.key_norm.scale"});
  }
  for (int i = 0; i < c.num_single_layers; ++i) {
    std::string t = "single_transformer_blocks." + std::to_string(i) + ".attn.";
    std::string o = "single_blocks." + std::to_string(i) + ".";
    out.push_back({t + "norm_q.weight", o + "norm.query_norm.scale"});
    out.push_back({t + "norm_k.weight", o + "norm.key_norm.scale"});
  }
  return out;
}

// The block indices present under "<kind>.N." and the largest one (-1: none).
std::set<int> BlockIndices(const TensorMap& w, const std::string& prefix, const std::string& kind) {
  std::set<int> out;
  const std::string start = prefix + kind + ".";
  for (const auto& [key, value] : w) {
    if (!StartsWith(key, start)) continue;
    size_t end = key.find('.', start.size());
    std::string n = key.substr(start.size(), end - start.size());
    if (n.empty() || n.size() > 4 || n.find_first_not_of("0123456789") != std::string::npos) {
      continue;
    }
    out.insert(std::stoi(n));
  }
  return out;
}

Status CheckContiguousBlocks(const std::set<int>& have, const std::string& kind) {
  if (have.empty()) return Status::Ok();
  std::string missing;
  int count = 0;
  for (int i = 0; i <= *have.rbegin(); ++i) {
    if (have.count(i)) continue;
    if (++count <= 8) missing += (missing.empty() ? "" : ", ") + kind + "." + std::to_string(i);
  }
  if (count == 0) return Status::Ok();
  if (count > 8) missing += " and " + std::to_string(count - 8) + " more";
  return Status::Invalid("FLUX single file: missing blocks " + missing + " (blocks 0.." +
                         std::to_string(*have.rbegin()) + " expected)");
}

Result<torch::Tensor> Need(const TensorMap& w, const std::string& key) {
  auto it = w.find(key);
  if (it == w.end()) return Status::Invalid("FLUX single file: missing key " + key);
  return it->second;
}

}  // namespace

std::vector<BflModule> FluxBlockModules(const FluxConfig& c) {
  std::vector<BflModule> out;
  for (int i = 0; i < c.num_layers; ++i) {
    std::string t = "transformer_blocks." + std::to_string(i) + ".";
    std::string o = "double_blocks." + std::to_string(i) + ".";
    out.push_back({o + "img_mod.lin", {t + "norm1.linear"}});
    out.push_back({o + "txt_mod.lin", {t + "norm1_context.linear"}});
    out.push_back({o + "img_attn.qkv", {t + "attn.to_q", t + "attn.to_k", t + "attn.to_v"}});
    out.push_back({o + "txt_attn.qkv",
                   {t + "attn.add_q_proj", t + "attn.add_k_proj", t + "attn.add_v_proj"}});
    out.push_back({o + "img_attn.proj", {t + "attn.to_out.0"}});
    out.push_back({o + "txt_attn.proj", {t + "attn.to_add_out"}});
    out.push_back({o + "img_mlp.0", {t + "ff.net.0.proj"}});
    out.push_back({o + "img_mlp.2", {t + "ff.net.2"}});
    out.push_back({o + "txt_mlp.0", {t + "ff_context.net.0.proj"}});
    out.push_back({o + "txt_mlp.2", {t + "ff_context.net.2"}});
  }
  for (int i = 0; i < c.num_single_layers; ++i) {
    std::string t = "single_transformer_blocks." + std::to_string(i) + ".";
    std::string o = "single_blocks." + std::to_string(i) + ".";
    out.push_back({o + "modulation.lin", {t + "norm.linear"}});
    out.push_back(
        {o + "linear1", {t + "attn.to_q", t + "attn.to_k", t + "attn.to_v", t + "proj_mlp"}});
    out.push_back({o + "linear2", {t + "proj_out"}});
  }
  return out;
}

bool IsFluxSingleFile(const TensorMap& w) {
  const std::string p = PrefixOf(w);
  if (!w.count(p + "img_in.weight")) return false;
  for (const auto& [key, value] : w) {
    if (StartsWith(key, p + "double_blocks.") || StartsWith(key, p + "single_blocks.")) return true;
  }
  return false;
}

Result<FluxConfig> InferFluxConfig(const TensorMap& w) {
  if (!IsFluxSingleFile(w)) {
    return Status::Invalid("not a FLUX single file (no img_in / double_blocks / single_blocks)");
  }
  const std::string p = PrefixOf(w);
  std::set<int> doubles = BlockIndices(w, p, "double_blocks");
  std::set<int> singles = BlockIndices(w, p, "single_blocks");
  GLEANER_RETURN_IF_ERROR(CheckContiguousBlocks(doubles, "double_blocks"));
  GLEANER_RETURN_IF_ERROR(CheckContiguousBlocks(singles, "single_blocks"));
  FluxConfig c;
  c.num_layers = doubles.empty() ? 0 : *doubles.rbegin() + 1;
  c.num_single_layers = singles.empty() ? 0 : *singles.rbegin() + 1;
  auto shape = [&](const std::string& key, int64_t dim) -> Result<int64_t> {
    Result<torch::Tensor> t = Need(w, p + key);
    if (!t.ok()) return t.status();
    if (t->dim() <= dim)
      return Status::Invalid("FLUX single file: " + p + key + " has too few dims");
    return t->size(dim);
  };
  Result<int64_t> inner = shape("img_in.weight", 0), in = shape("img_in.weight", 1);
  Result<int64_t> joint = shape("txt_in.weight", 1), pooled = shape("vector_in.in_layer.weight", 1);
  Result<int64_t> out = shape("final_layer.linear.weight", 0);
  Result<int64_t> head = c.num_layers > 0
                             ? shape("double_blocks.0.img_attn.norm.query_norm.scale", 0)
                             : shape("single_blocks.0.norm.query_norm.scale", 0);
  for (const Result<int64_t>* r : {&inner, &in, &joint, &pooled, &out, &head}) {
    if (!r->ok()) return r->status();
  }
  if (*head < 2 || *inner % *head != 0) {
    return Status::Invalid("FLUX single file: q/k norm size " + std::to_string(*head) +
                           " does not divide the width " + std::to_string(*inner));
  }
  c.in_channels = int(*in);
  c.out_channels = int(*out);
  c.attention_head_dim = int(*head);
  c.num_attention_heads = int(*inner / *head);
  c.joint_attention_dim = int(*joint);
  c.pooled_projection_dim = int(*pooled);
  c.guidance_embeds = w.count(p + "guidance_in.in_layer.weight") > 0;
  const int d = c.attention_head_dim;
  if (d == 128) {
    c.axes_dims_rope = {16, 56, 56};
  } else {
    int a = (d / 4) & ~1;
    c.axes_dims_rope = {a, a, d - 2 * a};
  }
  return ParseFluxConfig(FluxConfigToJson(c));  // every range checked as for a config.json
}

Result<TensorMap> DiffusersFromSingleFile(const TensorMap& w) {
  Result<FluxConfig> c = InferFluxConfig(w);
  if (!c.ok()) return c.status();
  const std::string p = PrefixOf(w);
  TensorMap out;
  std::set<std::string> used;
  auto take = [&](const std::string& key) -> Result<torch::Tensor> {
    used.insert(p + key);
    return Need(w, p + key);
  };
  Status s = CatchTorch("converting the FLUX single file", [&]() -> Status {
    for (const char* suffix : {".weight", ".bias"}) {
      for (const auto& [d, b] : TopRenames()) {
        if (!c->guidance_embeds && StartsWith(b, "guidance_in")) continue;
        Result<torch::Tensor> t = take(b + suffix);
        if (!t.ok()) return t.status();
        out[d + suffix] = *t;
      }
      Result<torch::Tensor> mod = take(std::string("final_layer.adaLN_modulation.1") + suffix);
      if (!mod.ok()) return mod.status();
      std::vector<torch::Tensor> shift_scale = mod->chunk(2, 0);
      out[std::string("norm_out.linear") + suffix] = Cat({shift_scale[1], shift_scale[0]});
      for (const BflModule& m : FluxBlockModules(*c)) {
        Result<torch::Tensor> t = take(m.bfl + suffix);
        if (!t.ok()) return t.status();
        if (m.diffusers.size() == 1) {
          out[m.diffusers[0] + suffix] = *t;
          continue;
        }
        // q, k, v are inner rows each; the single blocks' MLP part takes the rest.
        const int64_t inner = c->inner_dim();
        const int64_t rest = t->size(0) - 3 * inner;
        if (rest < 0 || (m.diffusers.size() == 3 && rest != 0)) {
          return Status::Invalid("FLUX single file: " + p + m.bfl + suffix + " has " +
                                 std::to_string(t->size(0)) + " rows");
        }
        for (size_t i = 0; i < m.diffusers.size(); ++i) {
          out[m.diffusers[i] + suffix] = t->narrow(0, int64_t(i) * inner, i < 3 ? inner : rest);
        }
      }
    }
    for (const auto& [d, b] : NormRenames(*c)) {
      Result<torch::Tensor> t = take(b);
      if (!t.ok()) return t.status();
      out[d] = *t;
    }
    return Status::Ok();
  });
  if (!s.ok()) return s;
  for (const auto& [key, value] : w) {
    if (StartsWith(key, p) && !used.count(key)) {
      return Status::Invalid("FLUX single file: unexpected key " + key);
    }
  }
  return out;
}

Result<TensorMap> SingleFileFromDiffusers(const TensorMap& w, const FluxConfig& c, bool prefix) {
  const std::string p = prefix ? kPrefix : "";
  TensorMap out;
  auto need = [&](const std::string& key) -> Result<torch::Tensor> {
    auto it = w.find(key);
    if (it == w.end()) return Status::Invalid("FLUX weights: missing key " + key);
    return it->second;
  };
  Status s = CatchTorch("converting FLUX weights to the single-file layout", [&]() -> Status {
    for (const char* suffix : {".weight", ".bias"}) {
      for (const auto& [d, b] : TopRenames()) {
        if (!c.guidance_embeds && StartsWith(b, "guidance_in")) continue;
        Result<torch::Tensor> t = need(d + suffix);
        if (!t.ok()) return t.status();
        out[p + b + suffix] = *t;
      }
      Result<torch::Tensor> mod = need(std::string("norm_out.linear") + suffix);
      if (!mod.ok()) return mod.status();
      std::vector<torch::Tensor> scale_shift = mod->chunk(2, 0);
      out[p + "final_layer.adaLN_modulation.1" + suffix] = Cat({scale_shift[1], scale_shift[0]});
      for (const BflModule& m : FluxBlockModules(c)) {
        std::vector<torch::Tensor> parts;
        for (const std::string& d : m.diffusers) {
          Result<torch::Tensor> t = need(d + suffix);
          if (!t.ok()) return t.status();
          parts.push_back(*t);
        }
        out[p + m.bfl + suffix] = parts.size() == 1 ? parts[0] : Cat(parts);
      }
    }
    for (const auto& [d, b] : NormRenames(c)) {
      Result<torch::Tensor> t = need(d);
      if (!t.ok()) return t.status();
      out[p + b] = *t;
    }
    return Status::Ok();
  });
  if (!s.ok()) return s;
  return out;
}

}  // namespace gleaner::train::flux
