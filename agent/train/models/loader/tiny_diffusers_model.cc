#include "agent/train/models/loader/tiny_diffusers_model.h"

#include <torch/torch.h>

#include "agent/train/models/flux/flux_config.h"
#include "agent/train/models/flux/flux_transformer.h"
#include "agent/train/models/text/clip_text_model.h"
#include "agent/train/models/text/t5_config.h"
#include "agent/train/models/text/t5_encoder.h"
#include "agent/train/models/unet/unet.h"
#include "agent/train/models/unet/unet_config.h"
#include "agent/train/models/vae/autoencoder_kl.h"
#include "agent/train/nn/torch_io.h"
#include "shared/json.h"

namespace gleaner::train::models {
namespace {

constexpr int64_t kVaeChannels = 16;

Status WriteJson(const std::string& path, const Json& j) {
  return WriteFileDurable(path, j.dump(2) + "\n");
}

// Parameters of a default-initialised module, keyed by state-dict name.
TensorMap StateDict(torch::nn::Module& m) {
  TensorMap out;
  for (const auto& p : m.named_parameters(true)) out[p.key()] = p.value().detach().contiguous();
  return out;
}

// Printable ASCII and its word-final forms ("!" first: id 0, SDXL tokenizer_2's pad), a few
// merges that make "a photo of sks dog" multi-character tokens, then the special tokens.
struct TinyVocab {
  Json vocab = Json::object();
  std::string merges = "#version: 0.2\n";
  int64_t size() const { return int64_t(vocab.size()); }
};

TinyVocab MakeVocab() {
  TinyVocab v;
  auto add = [&](const std::string& token) { v.vocab[token] = int64_t(v.vocab.size()); };
  for (int c = '!'; c <= '~'; ++c) add(std::string(1, char(c)));
  for (int c = '!'; c <= '~'; ++c) add(std::string(1, char(c)) + "</w>");
  const char* merges[][2] = {{"s", "k"},      {"sk", "s</w>"},   {"d", "o"},
                             {"do", "g</w>"}, {"p", "h"},        {"ph", "o"},
                             {"pho", "t"},    {"phot", "o</w>"}, {"o", "f</w>"}};
  for (const auto& m : merges) {
    v.merges += std::string(m[0]) + " " + m[1] + "\n";
    add(std::string(m[0]) + m[1]);
  }
  add("<|startoftext|>");
  add("<|endoftext|>");
  return v;
}

Status WriteTokenizer(const std::string& dir, const TinyVocab& v, const std::string& pad) {
  GLEANER_RETURN_IF_ERROR(MakeDirs(dir));
  GLEANER_RETURN_IF_ERROR(WriteJson(dir + "/vocab.json", v.vocab));
  GLEANER_RETURN_IF_ERROR(WriteFileDurable(dir + "/merges.txt", v.merges));
  Json special = {{"bos_token", "<|startoftext|>"},
                  {"eos_token", "<|endoftext|>"},
                  {"unk_token", "<|endoftext|>"},
                  {"pad_token", pad}};
  GLEANER_RETURN_IF_ERROR(WriteJson(dir + "/special_tokens_map.json", special));
  Json config = {{"tokenizer_class", "CLIPTokenizer"}, {"model_max_length", 77}};
  return WriteJson(dir + "/tokenizer_config.json", config);
}

// transformers' config.json for a tiny CLIP text encoder, and its random weights.
Status WriteTextEncoder(const std::string& dir, const TinyVocab& v, int64_t hidden, bool projection,
                        int64_t projection_dim) {
  GLEANER_RETURN_IF_ERROR(MakeDirs(dir));
  const int64_t eos = v.vocab["<|endoftext|>"].get<int64_t>();
  Json j = {{"architectures", {projection ? "CLIPTextModelWithProjection" : "CLIPTextModel"}},
            {"model_type", "clip_text_model"},
            {"vocab_size", v.size()},
            {"hidden_size", hidden},
            {"intermediate_size", 2 * hidden},
            {"num_hidden_layers", 2},
            {"num_attention_heads", 2},
            {"max_position_embeddings", 77},
            {"projection_dim", projection_dim},
            {"hidden_act", projection ? "gelu" : "quick_gelu"},
            {"layer_norm_eps", 1e-5},
            {"attention_dropout", 0.0},
            {"bos_token_id", v.vocab["<|startoftext|>"].get<int64_t>()},
            {"eos_token_id", eos},
            {"pad_token_id", 1},
            {"torch_dtype", "float32"}};
  GLEANER_RETURN_IF_ERROR(WriteJson(dir + "/config.json", j));
  Result<text::ClipTextConfig> config = text::ParseClipTextConfig(j);
  if (!config.ok()) return config.status();
  text::ClipTextModel model(*config);
  return SaveSafetensors(dir + "/model.safetensors", StateDict(model));
}

// flux: FLUX.1's VAE settings (no quant convs, shift_factor, its scaling factor).
Status WriteVae(const std::string& dir, bool sdxl, bool flux = false) {
  GLEANER_RETURN_IF_ERROR(MakeDirs(dir));
  Json j = {{"_class_name", "AutoencoderKL"},
            {"_diffusers_version", "0.31.0"},
            {"in_channels", 3},
            {"out_channels", 3},
            {"block_out_channels", {kVaeChannels, kVaeChannels}},
            {"down_block_types", {"DownEncoderBlock2D", "DownEncoderBlock2D"}},
            {"up_block_types", {"UpDecoderBlock2D", "UpDecoderBlock2D"}},
            {"layers_per_block", 1},
            {"latent_channels", 4},
            {"norm_num_groups", 8},
            {"act_fn", "silu"},
            {"sample_size", 16},
            {"scaling_factor", flux   ? 0.3611
                               : sdxl ? 0.13025
                                      : 0.18215},
            {"force_upcast", true}};
  if (flux) {
    j["shift_factor"] = 0.1159;
    j["use_quant_conv"] = false;
    j["use_post_quant_conv"] = false;
  }
  GLEANER_RETURN_IF_ERROR(WriteJson(dir + "/config.json", j));
  Result<vae::VaeConfig> config = vae::ParseVaeConfig(j);
  if (!config.ok()) return config.status();
  vae::AutoencoderKL model(*config);
  return SaveSafetensors(dir + "/diffusion_pytorch_model.safetensors", StateDict(model));
}

Json SchedulerConfig(bool sdxl) {
  Json j = {{"_class_name", sdxl ? "EulerDiscreteScheduler" : "PNDMScheduler"},
            {"_diffusers_version", "0.31.0"},
            {"num_train_timesteps", 1000},
            {"beta_start", 0.00085},
            {"beta_end", 0.012},
            {"beta_schedule", "scaled_linear"},
            {"prediction_type", "epsilon"},
            {"steps_offset", 1},
            {"timestep_spacing", "leading"}};
  if (!sdxl) j["skip_prk_steps"] = true;
  return j;
}

Json ModelIndex(bool sdxl) {
  Json j = {{"_class_name", sdxl ? "StableDiffusionXLPipeline" : "StableDiffusionPipeline"},
            {"_diffusers_version", "0.31.0"},
            {"unet", {"diffusers", "UNet2DConditionModel"}},
            {"vae", {"diffusers", "AutoencoderKL"}},
            {"text_encoder", {"transformers", "CLIPTextModel"}},
            {"tokenizer", {"transformers", "CLIPTokenizer"}},
            {"scheduler", {"diffusers", SchedulerConfig(sdxl)["_class_name"]}}};
  if (sdxl) {
    j["text_encoder_2"] = {"transformers", "CLIPTextModelWithProjection"};
    j["tokenizer_2"] = {"transformers", "CLIPTokenizer"};
  }
  return j;
}

// FLUX.1's T5 tokenizer in tokenizer.json form, tiny: a Unigram vocabulary of the special
// pieces, "▁", the printable ASCII characters (alone and after "▁") and a few words of the test
// prompts, no char map (the text is used as it is).
Json TinyT5Tokenizer() {
  const std::string sp = "\xe2\x96\x81";  // ▁
  Json vocab = Json::array({Json::array({"<pad>", 0.0}), Json::array({"</s>", 0.0}),
                            Json::array({"<unk>", 0.0}), Json::array({sp, -3.0})});
  for (int c = '!'; c <= '~'; ++c) {
    vocab.push_back(Json::array({std::string(1, char(c)), -6.0}));
    vocab.push_back(Json::array({sp + std::string(1, char(c)), -5.0}));
  }
  for (const char* word : {"photo", "of", "sks", "dog", "cat"}) {
    vocab.push_back(Json::array({sp + word, -2.0}));
  }
  Json added = Json::array();
  for (int id = 0; id < 3; ++id) {
    added.push_back({{"id", id},
                     {"content", vocab[size_t(id)][0]},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
  }
  Json metaspace = {
      {"type", "Metaspace"}, {"replacement", sp}, {"prepend_scheme", "always"}, {"split", true}};
  return {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer", nullptr},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers", Json::array({{{"type", "WhitespaceSplit"}}, metaspace})}}},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single", Json::array({{{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                                {{"SpecialToken", {{"id", "</s>"}, {"type_id", 0}}}}})}}},
      {"decoder", metaspace},
      {"model", {{"type", "Unigram"}, {"unk_id", 2}, {"vocab", vocab}, {"byte_fallback", false}}}};
}

// FLUX.1's text_encoder_2 (T5 v1.1, tiny: d_model = the transformer's joint_attention_dim) and
// tokenizer_2/.
Status WriteT5(const std::string& root, int64_t d_model) {
  const Json tokenizer = TinyT5Tokenizer();
  GLEANER_RETURN_IF_ERROR(MakeDirs(root + "/tokenizer_2"));
  GLEANER_RETURN_IF_ERROR(WriteJson(root + "/tokenizer_2/tokenizer.json", tokenizer));
  GLEANER_RETURN_IF_ERROR(
      WriteJson(root + "/tokenizer_2/tokenizer_config.json", {{"tokenizer_class", "T5Tokenizer"},
                                                              {"model_max_length", 512},
                                                              {"legacy", true},
                                                              {"extra_ids", 0}}));
  Json j = {{"architectures", {"T5EncoderModel"}},
            {"model_type", "t5"},
            {"vocab_size", int64_t(tokenizer["model"]["vocab"].size())},
            {"d_model", d_model},
            {"d_kv", 8},
            {"num_heads", 4},
            {"d_ff", 2 * d_model},
            {"num_layers", 2},
            {"feed_forward_proj", "gated-gelu"},
            {"dense_act_fn", "gelu_new"},
            {"is_gated_act", true},
            {"relative_attention_num_buckets", 32},
            {"relative_attention_max_distance", 128},
            {"layer_norm_epsilon", 1e-6},
            {"dropout_rate", 0.0},
            {"pad_token_id", 0},
            {"eos_token_id", 1},
            {"torch_dtype", "float32"}};
  GLEANER_RETURN_IF_ERROR(MakeDirs(root + "/text_encoder_2"));
  GLEANER_RETURN_IF_ERROR(WriteJson(root + "/text_encoder_2/config.json", j));
  Result<text::T5Config> config = text::ParseT5Config(j);
  if (!config.ok()) return config.status();
  text::T5Encoder model(*config);
  return SaveSafetensors(root + "/text_encoder_2/model.safetensors", StateDict(model));
}

}  // namespace

Status WriteTinyDiffusersModel(const std::string& dir, bool sdxl, uint64_t seed) {
  return CatchTorch("make-model --diffusers", [&]() -> Status {
    GLEANER_RETURN_IF_ERROR(MakeDirs(dir));
    GLEANER_RETURN_IF_ERROR(WriteJson(dir + "/model_index.json", ModelIndex(sdxl)));

    unet::UNetConfig unet = sdxl ? unet::TinySdxlConfig() : unet::TinyConfig();
    unet.sample_size = {8};
    GLEANER_RETURN_IF_ERROR(MakeDirs(dir + "/unet"));
    GLEANER_RETURN_IF_ERROR(WriteJson(dir + "/unet/config.json", unet::UNetConfigToJson(unet)));
    GLEANER_RETURN_IF_ERROR(SaveSafetensors(dir + "/unet/diffusion_pytorch_model.safetensors",
                                            unet::RandomWeights(unet, seed)));

    torch::manual_seed(seed + 1);
    GLEANER_RETURN_IF_ERROR(WriteVae(dir + "/vae", sdxl));
    const TinyVocab vocab = MakeVocab();
    const int64_t d = unet.cross_attention_dim;
    if (!sdxl) {
      GLEANER_RETURN_IF_ERROR(WriteTokenizer(dir + "/tokenizer", vocab, "<|endoftext|>"));
      GLEANER_RETURN_IF_ERROR(WriteTextEncoder(dir + "/text_encoder", vocab, d, false, d));
    } else {
      // SDXL: both encoders' penultimate states side by side make cross_attention_dim; encoder
      // 2's projection is the pooled embedding.
      GLEANER_RETURN_IF_ERROR(WriteTokenizer(dir + "/tokenizer", vocab, "<|endoftext|>"));
      GLEANER_RETURN_IF_ERROR(WriteTokenizer(dir + "/tokenizer_2", vocab, "!"));
      GLEANER_RETURN_IF_ERROR(WriteTextEncoder(dir + "/text_encoder", vocab, d / 2, false, d / 2));
      GLEANER_RETURN_IF_ERROR(
          WriteTextEncoder(dir + "/text_encoder_2", vocab, d - d / 2, true, unet.pooled_dim()));
    }
    GLEANER_RETURN_IF_ERROR(MakeDirs(dir + "/scheduler"));
    return WriteJson(dir + "/scheduler/scheduler_config.json", SchedulerConfig(sdxl));
  });
}

}  // namespace gleaner::train::models

namespace gleaner::train::models {

Status WriteTinyFluxModel(const std::string& dir, uint64_t seed) {
  return CatchTorch("make-model --diffusers --flux", [&]() -> Status {
    GLEANER_RETURN_IF_ERROR(MakeDirs(dir));
    Json index = {{"_class_name", "FluxPipeline"},
                  {"_diffusers_version", "0.31.0"},
                  {"transformer", {"diffusers", "FluxTransformer2DModel"}},
                  {"vae", {"diffusers", "AutoencoderKL"}},
                  {"text_encoder", {"transformers", "CLIPTextModel"}},
                  {"tokenizer", {"transformers", "CLIPTokenizer"}},
                  {"text_encoder_2", {"transformers", "T5EncoderModel"}},
                  {"tokenizer_2", {"transformers", "T5TokenizerFast"}},
                  {"scheduler", {"diffusers", "FlowMatchEulerDiscreteScheduler"}}};
    GLEANER_RETURN_IF_ERROR(WriteJson(dir + "/model_index.json", index));

    const flux::FluxConfig config = flux::TinyFluxConfig();
    GLEANER_RETURN_IF_ERROR(MakeDirs(dir + "/transformer"));
    GLEANER_RETURN_IF_ERROR(
        WriteJson(dir + "/transformer/config.json", flux::FluxConfigToJson(config)));
    torch::manual_seed(seed);
    {
      flux::FluxTransformer model(config);
      GLEANER_RETURN_IF_ERROR(SaveSafetensors(
          dir + "/transformer/diffusion_pytorch_model.safetensors", StateDict(model)));
    }
    torch::manual_seed(seed + 1);
    GLEANER_RETURN_IF_ERROR(WriteVae(dir + "/vae", false, true));
    const TinyVocab vocab = MakeVocab();
    GLEANER_RETURN_IF_ERROR(WriteTokenizer(dir + "/tokenizer", vocab, "<|endoftext|>"));
    GLEANER_RETURN_IF_ERROR(WriteTextEncoder(dir + "/text_encoder", vocab,
                                             config.pooled_projection_dim, false,
                                             config.pooled_projection_dim));
    GLEANER_RETURN_IF_ERROR(WriteT5(dir, config.joint_attention_dim));
    // FLUX.1-dev's scheduler (dynamic shifting from the image token count).
    Json scheduler = {{"_class_name", "FlowMatchEulerDiscreteScheduler"},
                      {"_diffusers_version", "0.31.0"},
                      {"num_train_timesteps", 1000},
                      {"shift", 3.0},
                      {"use_dynamic_shifting", true},
                      {"base_shift", 0.5},
                      {"max_shift", 1.15},
                      {"base_image_seq_len", 256},
                      {"max_image_seq_len", 4096}};
    GLEANER_RETURN_IF_ERROR(MakeDirs(dir + "/scheduler"));
    return WriteJson(dir + "/scheduler/scheduler_config.json", scheduler);
  });
}

}  // namespace gleaner::train::models
