// SDXL-shaped lora-sd jobs: datasets with pooled text embeddings and time_ids (make-dataset
// --sdxl, validation against the config), bad SDXL inputs failing with one clear error and
// writing nothing, kohya outputs with sd-scripts' SDXL key names, and the forward CLI.
#include "agent/protocol/checkpoint_dir.h"
#include "agent/protocol/trainer_protocol.h"
#include "agent/train/models/unet/unet_lora.h"
#include "agent/train/training/trainer.h"
#include "train_test_util.h"  // Catch2, via the CHECK fix-up

using namespace gleaner;
using namespace gleaner::train;
using namespace gleaner::train::testing;

TEST_CASE("make-dataset --sdxl is deterministic and fits the tiny SDXL config",
          "[lora_sd][sdxl][cli]") {
  TempDir tmp;
  REQUIRE(RunBin({"make-dataset", "--out", tmp / "a", "--n", "6", "--sdxl", "--prior"}) == 0);
  REQUIRE(RunBin({"make-dataset", "--out", tmp / "b", "--n", "6", "--sdxl", "--prior"}) == 0);
  CHECK(Bytes(tmp / "a") == Bytes(tmp / "b"));
  Result<Dataset> d = LoadDataset(tmp / "a", ShapeOf(TinySdxlConfig()));
  REQUIRE(d.ok());
  CHECK(d->instance.pooled.sizes() == torch::IntArrayRef({6, 32}));
  CHECK(d->instance.time_ids.sizes() == torch::IntArrayRef({6, 6}));
  CHECK(d->prior.pooled.sizes() == torch::IntArrayRef({6, 32}));
  CHECK(d->prior.time_ids[0][0].item<float>() == 128.0f);  // 16 latents = 128 pixels
  // The same file does not fit an SD config, nor an SDXL config with another pooled size.
  Result<Dataset> sd = LoadDataset(tmp / "a", ShapeOf(TinyConfig()));
  REQUIRE_FALSE(sd.ok());
  CHECK(sd.status().message().find("takes no pooled text embedding") != std::string::npos);
  REQUIRE(RunBin({"make-dataset", "--out", tmp / "c", "--pooled", "48"}) == 0);
  REQUIRE(LoadDataset(tmp / "c", ShapeOf(TinySdxlConfig()))
              .status()
              .message()
              .find("pooled_text_embeddings must be [16, 32]") != std::string::npos);
}

TEST_CASE("SDXL dataset errors name the tensor and the expected shape", "[lora_sd][sdxl]") {
  TinyJob job(4, /*prior=*/true, /*sdxl=*/true);
  TensorMap good = MustLoad(job.tmp / "data.safetensors");
  auto message = [&](const TensorMap& t, const UNetConfig& c) {
    REQUIRE(SaveSafetensors(job.tmp / "bad.safetensors", t).ok());
    Result<Dataset> d = LoadDataset(job.tmp / "bad.safetensors", ShapeOf(c));
    REQUIRE_FALSE(d.ok());
    return d.status().message();
  };
  TensorMap t = good;
  t["pooled_text_embeddings"] = torch::zeros({4, 31});
  CHECK(message(t, job.config).find("pooled_text_embeddings must be [4, 32]") != std::string::npos);
  t = good;
  t.erase("time_ids");
  CHECK(message(t, job.config).find("missing time_ids [4, 6]") != std::string::npos);
  t = good;
  t.erase("class_pooled_text_embeddings");
  CHECK(message(t, job.config).find("missing class_pooled_text_embeddings") != std::string::npos);
  t = good;
  t["time_ids"] = torch::zeros({4, 5});
  CHECK(message(t, job.config).find("time_ids must be [4, 6]") != std::string::npos);
  t = good;
  t["class_time_ids"] = torch::full({4, 6}, std::nan(""));
  CHECK(message(t, job.config).find("NaN or Inf") != std::string::npos);
  // A config whose sizes say another pooled size (P + 6 * 8 = 96 -> P = 48).
  UNetConfig other = job.config;
  other.projection_class_embeddings_input_dim = 96;
  CHECK(message(good, other).find("must be [4, 48]") != std::string::npos);
}

TEST_CASE("bad SDXL inputs fail the run with one clear error and write nothing",
          "[lora_sd][sdxl]") {
  TinyJob job(4, /*prior=*/false, /*sdxl=*/true);
  TensorMap good = MustLoad(job.tmp / "data.safetensors");
  Json spec = job.Spec({{"steps", 2}});
  auto fails_cleanly = [&](const Json& s, const char* what) {
    INFO(what);
    std::string work = job.tmp / (std::string("work-") + what);
    CHECK(job.Run(s, work) == kExitFailed);
    CHECK(FilesUnder(work).empty());
  };
  TensorMap t = good;
  t["pooled_text_embeddings"] = torch::zeros({4, 40});
  REQUIRE(SaveSafetensors(job.tmp / "data.safetensors", t).ok());
  fails_cleanly(spec, "wrong-pooled-size");
  t = good;
  t.erase("time_ids");
  REQUIRE(SaveSafetensors(job.tmp / "data.safetensors", t).ok());
  fails_cleanly(spec, "missing-time-ids");
  REQUIRE(SaveSafetensors(job.tmp / "data.safetensors", good).ok());
  Json mismatched = spec;  // the config's sizes do not add up to the dataset's
  mismatched["model"]["config"]["projection_class_embeddings_input_dim"] = 96;
  fails_cleanly(mismatched, "mismatched-config");
  Json sd_config = spec;  // an SD config with an SDXL dataset (and SDXL weights)
  sd_config["model"]["config"] = UNetConfigToJson(TinyConfig());
  fails_cleanly(sd_config, "sd-config");
  Json unsupported = spec;
  unsupported["model"]["config"]["addition_embed_type"] = "image";
  fails_cleanly(unsupported, "unsupported-embedding");
  // The same through the binary: exit 2 and one readable line on stderr naming the tensor.
  t = good;
  t.erase("time_ids");
  REQUIRE(SaveSafetensors(job.tmp / "data.safetensors", t).ok());
  REQUIRE(WriteFileDurable(job.tmp / "SPEC.json", spec.dump()).ok());
  CHECK(RunBin({"run", "--spec", job.tmp / "SPEC.json", "--work-dir", job.tmp / "bin"},
               job.tmp / "err.txt") == kExitFailed);
  std::string err = Bytes(job.tmp / "err.txt");
  INFO(err);
  CHECK(err.find("missing time_ids") != std::string::npos);
  CHECK(std::count(err.begin(), err.end(), '\n') == 1);
  CHECK(FilesUnder(job.tmp / "bin").empty());
  // And with good data it trains.
  REQUIRE(SaveSafetensors(job.tmp / "data.safetensors", good).ok());
  CHECK(job.Run(spec, job.tmp / "ok") == kExitDone);
}

TEST_CASE("SDXL outputs: kohya keys as sd-scripts writes SDXL LoRAs, PEFT keys as diffusers",
          "[lora_sd][sdxl][fixture]") {
  SKIP_WITHOUT_SDXL_FIXTURES(dirs);
  const std::string dir = dirs.front();
  UNetConfig config = MustConfig(dir + "/config.json");
  TinyJob job(4, /*prior=*/false, /*sdxl=*/true);
  // A dataset for the fixture's sizes.
  MakeDatasetOptions o;
  o.n = 4;
  o.size = 8;
  o.dim = config.cross_attention_dim;
  o.pooled = config.pooled_dim();
  Result<std::string> data = MakeDataset(o);
  REQUIRE(data.ok());
  REQUIRE(WriteFileDurable(job.tmp / "data.safetensors", *data).ok());
  Json spec = job.Spec({{"steps", 2}, {"rank", 4}, {"alpha", 4}});
  spec["inputs"]["model"] = dir + "/weights.safetensors";
  spec["model"]["config"] = *ParseJson(Bytes(dir + "/config.json"));
  REQUIRE(job.Run(spec, job.tmp / "w") == kExitDone);
  std::string out = OutputDirFor(job.tmp / "w");
  std::map<std::string, std::string> meta;
  TensorMap kohya = MustLoad(out + "/lora.safetensors", &meta);
  TensorMap peft = MustLoad(out + "/lora_peft.safetensors");
  TensorMap ref = MustLoad(dir + "/lora/lora.safetensors");
  CheckSameKeysAndShapes(peft, ref);  // PEFT: exactly the fixture's keys and shapes
  // kohya: the fixture's modules under their LDM names, A as lora_down, B as lora_up, alpha.
  REQUIRE(kohya.size() == ref.size() / 2 * 3);
  const std::string suffix = ".lora_A.weight";
  for (const auto& [k, v] : ref) {
    if (k.size() < suffix.size() || k.compare(k.size() - suffix.size(), suffix.size(), suffix)) {
      continue;
    }
    std::string module = k.substr(5, k.size() - 5 - suffix.size());  // drop "unet." and suffix
    std::string prefix = KohyaLoraPrefix(config, module);
    INFO(module << " -> " << prefix);
    REQUIRE(kohya.count(prefix + ".lora_down.weight"));
    CHECK(torch::equal(kohya.at(prefix + ".lora_down.weight"), peft.at(k)));
    CHECK(kohya.count(prefix + ".lora_up.weight"));
    CHECK(kohya.at(prefix + ".alpha").item<float>() == 4.0f);
  }
  CHECK(kohya.count("lora_unet_input_blocks_4_1_transformer_blocks_0_attn1_to_q.lora_down.weight"));
  CHECK(kohya.count("lora_unet_middle_block_1_transformer_blocks_1_attn2_to_out_0.alpha"));
  CHECK(kohya.count("lora_unet_output_blocks_0_1_transformer_blocks_0_attn1_to_k.lora_up.weight"));
  CHECK(meta.at("ss_base_model_version") == "sdxl_base_v1-0");
  CHECK(meta.at("ss_network_module") == "networks.lora");
}

TEST_CASE("SDXL forward CLI reads text_embeds and time_ids", "[lora_sd][sdxl][cli][fixture]") {
  SKIP_WITHOUT_SDXL_FIXTURES(dirs);
  const std::string dir = dirs.front();
  TempDir tmp;
  CheckForwardCli(dir, dir + "/lora/lora.safetensors", tmp / "o.safetensors");
  TensorMap in = MustLoad(dir + "/inputs.safetensors");
  in.erase("time_ids");
  REQUIRE(SaveSafetensors(tmp / "no_ids.safetensors", in).ok());
  CHECK(RunBin(
            {"forward", "--config", dir + "/config.json", "--weights", dir + "/weights.safetensors",
             "--inputs", tmp / "no_ids.safetensors", "--out", tmp / "x"},
            tmp / "err.txt") == kExitFailed);
  CHECK(Bytes(tmp / "err.txt").find("missing tensor time_ids") != std::string::npos);
}
