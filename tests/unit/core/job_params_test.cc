// shared/job_params: validation and defaults per kind.
#include "shared/job_params.h"

#include <catch2/catch.hpp>

using namespace gleaner;

TEST_CASE("synthetic params: defaults and ranges", "[params]") {
  auto r = NormalizeParams("synthetic", {{"steps", 50}});
  REQUIRE(r.ok());
  CHECK(*r == Json({{"steps", 50}, {"step_ms", 0}, {"checkpoint_every", 50}, {"seed", 0}}));
  auto full = NormalizeParams("synthetic", {{"steps", 1000},
                                            {"step_ms", 10},
                                            {"checkpoint_every", 7},
                                            {"seed", 42},
                                            {"fail_at_step", 500},
                                            {"crash_at_step", 9}});
  REQUIRE(full.ok());
  CHECK((*full)["fail_at_step"] == 500);
  CHECK((*full)["crash_at_step"] == 9);
  for (const Json& bad :
       {Json{{"steps", 10}, {"step_ms", 60001}}, Json{{"steps", 10}, {"seed", -1}},
        Json{{"steps", 10000001}}, Json{{"steps", 10}, {"crash_at_step", 11}},
        Json{{"steps", true}}, Json::array()}) {
    INFO(bad.dump());
    auto e = NormalizeParams("synthetic", bad);
    CHECK_FALSE(e.ok());
    CHECK(e.status().code() == Code::kInvalidArgument);
  }
  auto msg = NormalizeParams("synthetic", {{"steps", 10}, {"step_ms", -1}});
  CHECK(msg.status().message() == "params.step_ms must be an integer in [0, 60000]");
}

TEST_CASE("lora-sd params: every default, alpha follows rank", "[params]") {
  auto r = NormalizeParams("lora-sd", {{"steps", 500}, {"rank", 16}});
  REQUIRE(r.ok());
  const Json& p = *r;
  CHECK(p["steps"] == 500);
  CHECK(p["batch_size"] == 1);
  CHECK(p["learning_rate"] == 1e-4);
  CHECK(p["rank"] == 16);
  CHECK(p["alpha"] == 16.0);
  CHECK(p["seed"] == 0);
  CHECK(p["checkpoint_every"] == 100);
  CHECK(p["mixed_precision"] == "no");
  CHECK(p["gradient_checkpointing"] == false);
  CHECK(p["gradient_accumulation"] == 1);
  CHECK(p["lr_scheduler"] == "constant");
  CHECK(p["warmup_steps"] == 0);
  CHECK(p["prediction_type"] == "epsilon");
  CHECK(p["prior_loss_weight"] == 1.0);
  CHECK(p["snr_gamma"] == 0.0);
  CHECK(p["noise_offset"] == 0.0);
  CHECK(p["max_grad_norm"] == 1.0);
  CHECK(p["adam_beta1"] == 0.9);
  CHECK(p["adam_beta2"] == 0.999);
  CHECK(p["adam_weight_decay"] == 0.01);
  CHECK(p["adam_epsilon"] == 1e-8);
  CHECK(p.size() == 21);
  CHECK((*NormalizeParams("lora-sd", {{"steps", 20}}))["checkpoint_every"] == 20);
  for (const Json& bad :
       {Json{{"steps", 10}, {"mixed_precision", "fp8"}},
        Json{{"steps", 10}, {"lr_scheduler", "step"}},
        Json{{"steps", 10}, {"prediction_type", "sample"}},
        Json{{"steps", 10}, {"learning_rate", 0}}, Json{{"steps", 10}, {"learning_rate", 2}},
        Json{{"steps", 10}, {"rank", 0}}, Json{{"steps", 10}, {"adam_beta1", 1.0}},
        Json{{"steps", 10}, {"warmup_steps", 11}},
        Json{{"steps", 10}, {"gradient_checkpointing", 1}}, Json{{"steps", 10}, {"unknown", 1}},
        Json{{"batch_size", 2}}}) {
    INFO(bad.dump());
    CHECK_FALSE(NormalizeParams("lora-sd", bad).ok());
  }
  CHECK_FALSE(NormalizeParams("gan", {{"steps", 1}}).ok());
}

TEST_CASE("lora-sd params typed: the struct the trainer reads equals the stored JSON", "[params]") {
  Result<LoraSdParams> p = LoraSdParams::Parse(
      {{"steps", 300}, {"rank", 16}, {"mixed_precision", "bf16"}, {"adam_beta2", 0.99}});
  REQUIRE(p.ok());
  CHECK(p->steps == 300);
  CHECK(p->rank == 16);
  CHECK(p->alpha == 16.0);
  CHECK(p->checkpoint_every == 100);
  CHECK(p->mixed_precision == "bf16");
  CHECK(p->adam_beta2 == 0.99);
  CHECK(p->gradient_checkpointing == false);
  // Normalising is parsing then serialising, and parsing the result again changes nothing.
  Json stored = *NormalizeParams(
      "lora-sd", {{"steps", 300}, {"rank", 16}, {"mixed_precision", "bf16"}, {"adam_beta2", 0.99}});
  CHECK(p->ToJson() == stored);
  CHECK(LoraSdParams::Parse(stored)->ToJson() == stored);
  Result<LoraSdParams> bad = LoraSdParams::Parse({{"steps", 10}, {"warmup_steps", 11}});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message() == "params.warmup_steps must be an integer in [0, 10]");
}

TEST_CASE("UNet config check", "[params]") {
  CHECK(CheckUnetConfig({{"block_out_channels", {320, 640}}}, "model.config").ok());
  CHECK_FALSE(CheckUnetConfig(Json::object(), "model.config").ok());
  CHECK_FALSE(CheckUnetConfig({{"block_out_channels", Json::array()}}, "c").ok());
  CHECK_FALSE(CheckUnetConfig({{"block_out_channels", {0}}}, "c").ok());
  CHECK_FALSE(CheckUnetConfig(Json::array(), "c").ok());
}

TEST_CASE("UNet config check: SDXL's text_time sizes must leave a pooled embedding", "[params]") {
  Json xl = {{"block_out_channels", {320, 640, 1280}},
             {"addition_embed_type", "text_time"},
             {"addition_time_embed_dim", 256},
             {"projection_class_embeddings_input_dim", 2816}};
  CHECK(CheckUnetConfig(xl, "model.config").ok());
  Json null_type = {{"block_out_channels", {320}}, {"addition_embed_type", nullptr}};
  CHECK(CheckUnetConfig(null_type, "model.config").ok());
  auto message = [](const Json& c) { return CheckUnetConfig(c, "model.config").message(); };
  Json bad = xl;
  bad["projection_class_embeddings_input_dim"] = 1536;
  CHECK(message(bad) ==
        "model.config.projection_class_embeddings_input_dim (1536) must exceed 6 * "
        "addition_time_embed_dim (1536): the rest is the size of the pooled text embedding");
  bad = xl;
  bad.erase("addition_time_embed_dim");
  CHECK(message(bad).find("model.config.addition_time_embed_dim") != std::string::npos);
  bad = xl;
  bad["addition_embed_type"] = "image";
  CHECK(message(bad).find("addition_embed_type \"image\" is not supported") != std::string::npos);
  bad = xl;
  bad["projection_class_embeddings_input_dim"] = "2816";
  CHECK_FALSE(CheckUnetConfig(bad, "model.config").ok());
}

TEST_CASE("lora-sd num_class_images: 1..1000, kept when given, needs class_prompt", "[params]") {
  Json ok = *NormalizeParams("lora-sd",
                             {{"steps", 10}, {"class_prompt", "a dog"}, {"num_class_images", 200}});
  CHECK(ok["num_class_images"] == 200);
  CHECK(LoraSdParams::Parse(ok)->num_class_images == 200);
  CHECK(LoraSdParams::Parse(ok)->ToJson() == ok);
  CHECK_FALSE(NormalizeParams("lora-sd", {{"steps", 10}})->contains("num_class_images"));
  Result<LoraSdParams> alone = LoraSdParams::Parse({{"steps", 10}, {"num_class_images", 5}});
  REQUIRE_FALSE(alone.ok());
  CHECK(alone.status().message().find("params.num_class_images needs params.class_prompt") == 0);
  for (const Json& n : {Json(0), Json(1001), Json(-1), Json(2.5), Json("5")}) {
    INFO(n.dump());
    Result<LoraSdParams> bad =
        LoraSdParams::Parse({{"steps", 10}, {"class_prompt", "a dog"}, {"num_class_images", n}});
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.status().message().find("params.num_class_images") == 0);
  }
}

TEST_CASE("lora-sd params: upper bounds from a 24 GB card, refused with the field and the limit",
          "[params]") {
  struct Case {
    const char* field;
    int64_t max;
  };
  for (const Case& c : {Case{"batch_size", kMaxBatchSize}, Case{"rank", kMaxLoraRank}}) {
    INFO(c.field);
    CHECK(NormalizeParams("lora-sd", {{"steps", 10}, {c.field, c.max}}).ok());
    Result<Json> over = NormalizeParams("lora-sd", {{"steps", 10}, {c.field, c.max + 1}});
    REQUIRE_FALSE(over.ok());
    CHECK(over.status().message() == std::string("params.") + c.field +
                                         " must be an integer in [1, " + std::to_string(c.max) +
                                         "]");
  }
  CHECK(kMaxBatchSize == 64);
  CHECK(kMaxLoraRank == 256);
  CHECK(kMaxSampleResolution == 2048);
  for (const char* kind : {"lora-sd", "synthetic"}) {
    INFO(kind);
    Json p = {{"steps", 10}, {"sample_prompts", {"a photo"}}, {"sample_resolution", 2048}};
    CHECK(NormalizeParams(kind, p).ok());
    p["sample_resolution"] = 2056;
    Result<Json> over = NormalizeParams(kind, p);
    REQUIRE_FALSE(over.ok());
    CHECK(over.status().message() == "params.sample_resolution must be an integer in [8, 2048]");
    p["sample_resolution"] = 4096;
    CHECK_FALSE(NormalizeParams(kind, p).ok());
  }
  // The submission: batch 1024 and 4096 px samples.
  CHECK_FALSE(NormalizeParams("lora-sd", {{"steps", 10}, {"batch_size", 1024}}).ok());
}

TEST_CASE("lora-sd params: each family takes its own fields", "[params]") {
  Result<Json> flux = NormalizeParams("lora-sd",
                                      {{"steps", 10},
                                       {"weighting_scheme", "mode"},
                                       {"mode_scale", 1.5},
                                       {"timestep_shift", "static"},
                                       {"discrete_flow_shift", 3.1582},
                                       {"sample_prompts", {"a photo of sks dog"}}},
                                      ModelFamily::kFlux);
  REQUIRE(flux.ok());
  CHECK((*flux)["mode_scale"] == 1.5);
  CHECK((*flux)["guidance_scale"] == 3.5);  // FluxPipeline's default for samples
  CHECK_FALSE(flux->contains("snr_gamma"));
  Result<LoraSdParams> back = LoraSdParams::Parse(*flux, ModelFamily::kFlux);
  REQUIRE(back.ok());
  CHECK(back->ToJson() == *flux);
  // SD keeps its fields and defaults, and stores none of FLUX's.
  Result<Json> sd = NormalizeParams("lora-sd", {{"steps", 10}, {"sample_prompts", {"a dog"}}});
  REQUIRE(sd.ok());
  CHECK((*sd)["guidance_scale"] == 7.5);
  CHECK((*sd)["prediction_type"] == "epsilon");
  CHECK_FALSE(sd->contains("weighting_scheme"));
  for (const char* key : {"snr_gamma", "noise_offset", "prediction_type"}) {
    Json p = {{"steps", 10},
              {key, key == std::string("prediction_type") ? Json("epsilon") : Json(0)}};
    Result<Json> r = NormalizeParams("lora-sd", p, ModelFamily::kFlux);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message().find(std::string("params.") + key) == 0);
  }
  for (const char* key : {"weighting_scheme", "guidance", "max_sequence_length", "lora_targets"}) {
    Result<Json> r = NormalizeParams("lora-sd", {{"steps", 10}, {key, "x"}});
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message() ==
          std::string("params.") + key +
              " applies to FLUX models only (this job's model is an SD/SDXL UNet)");
  }
  CHECK_FALSE(
      NormalizeParams("lora-sd", {{"steps", 10}, {"weighting_scheme", "sigma"}}, ModelFamily::kFlux)
          .ok());
  CHECK_FALSE(
      NormalizeParams("lora-sd", {{"steps", 10}, {"max_sequence_length", 513}}, ModelFamily::kFlux)
          .ok());
  Result<Json> te =
      NormalizeParams("lora-sd", {{"steps", 10}, {"train_text_encoder", true}}, ModelFamily::kFlux);
  REQUIRE_FALSE(te.ok());
  CHECK(te.status().message().find("params.train_text_encoder is not supported for FLUX") == 0);
}

TEST_CASE("lora-sd params: resolution is kept only when given, a multiple of 64", "[params]") {
  Result<Json> none = NormalizeParams("lora-sd", {{"steps", 10}});
  REQUIRE(none.ok());
  CHECK_FALSE(none->contains("resolution"));
  Result<Json> some = NormalizeParams("lora-sd", {{"steps", 10}, {"resolution", 768}});
  REQUIRE(some.ok());
  CHECK((*some)["resolution"] == 768);
  for (int64_t bad : {0, 32, 100, 4160}) {
    Result<Json> r = NormalizeParams("lora-sd", {{"steps", 10}, {"resolution", bad}});
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message().find("params.resolution") == 0);
  }
}
