// The coordinator checks a UNet config with the trainer's own limits (shared/unet_limits.h): a
// value the trainer would refuse is a 400 at submission, naming the field and the limit.
#include "shared/unet_limits.h"

#include "shared/job_params.h"
#include "tests/unit/core/test_env.h"

using namespace gleaner;
using namespace gleaner::testing;

TEST_CASE("UNet config limits: one table, every field checked at its bounds", "[params]") {
  REQUIRE(kUnetConfigLimitCount >= 10);
  for (size_t i = 0; i < kUnetConfigLimitCount; ++i) {
    const UnetConfigLimit& l = kUnetConfigLimits[i];
    INFO(l.field);
    Json config = {{"block_out_channels", {32, 64}}};
    config[l.field] = l.max;
    if (std::string(l.field) == "block_out_channels") config[l.field] = {32, l.max};
    CHECK(CheckUnetConfig(config, "model.config").ok());
    config[l.field] = l.max + 1;
    if (std::string(l.field) == "block_out_channels") config[l.field] = {32, l.max + 1};
    Status s = CheckUnetConfig(config, "model.config");
    CHECK(s.code() == Code::kInvalidArgument);
    CHECK(s.message().find(std::string("model.config.") + l.field) != std::string::npos);
    CHECK(s.message().find(std::to_string(l.max)) != std::string::npos);
    config[l.field] = l.min - 1;
    CHECK_FALSE(CheckUnetConfig(config, "model.config").ok());
  }
  // Lists and per-layer lists are checked entry by entry; other shapes are refused.
  Json nested = {{"block_out_channels", {320, 640}},
                 {"transformer_layers_per_block", {1, {2, 65}}}};
  CHECK(CheckUnetConfig(nested, "c").message() ==
        "c.transformer_layers_per_block entries must be integers in [1, 64]");
  CHECK_FALSE(
      CheckUnetConfig({{"block_out_channels", {32}}, {"cross_attention_dim", "768"}}, "c").ok());
  Json nine = {{"block_out_channels", std::vector<int>(kMaxUnetBlocks + 1, 32)}};
  CHECK(CheckUnetConfig(nine, "c").message() ==
        "c.block_out_channels must be a list of 1..8 "
        "integers");
  CHECK(UnetLimit("block_out_channels").max == 8192);
}

TEST_CASE("jobs: a UNet config beyond the trainer's limits is a 400 naming field and limit",
          "[jobs]") {
  TestEnv env;
  std::string dev = env.Developer();
  auto upload = [&](const std::string& name, const std::string& bytes) {
    Resp r =
        env.Post("/v1/uploads", dev,
                 {{"name", name}, {"size", int64_t(bytes.size())}, {"sha256", Sha256Hex(bytes)}});
    REQUIRE(r.status == 201);
    env.StoreBlob(r.json["key"], bytes);
    return std::make_pair(r.json["uri"].get<std::string>(), Sha256Hex(bytes));
  };
  // Plain variables, not structured bindings: a lambda may not capture those before C++20.
  const std::pair<std::string, std::string> model = upload("unet.safetensors", "weights");
  const std::pair<std::string, std::string> data = upload("data.safetensors", "latents");
  const std::string model_uri = model.first, model_sha = model.second;
  const std::string data_uri = data.first, data_sha = data.second;
  auto submit = [&](const Json& config) {
    return env.Post("/v1/jobs", dev,
                    {{"kind", "lora-sd"},
                     {"params", {{"steps", 20}}},
                     {"model", {{"uri", model_uri}, {"sha256", model_sha}, {"config", config}}},
                     {"dataset", {{"uri", data_uri}, {"sha256", data_sha}}}});
  };
  Json wide = {{"block_out_channels", {32, 65536}}, {"cross_attention_dim", 32}};
  Resp r = submit(wide);
  INFO(r.body);
  CHECK(r.status == 400);
  CHECK(r.json["error"]["message"] ==
        "model.config.block_out_channels entries must be integers in [1, 8192]");
  Json heads = {
      {"block_out_channels", {32, 64}}, {"cross_attention_dim", 32}, {"attention_head_dim", 4096}};
  Resp h = submit(heads);
  CHECK(h.status == 400);
  CHECK(h.json["error"]["message"] ==
        "model.config.attention_head_dim must be an integer in [1, 1024]");
  CHECK(submit({{"block_out_channels", {32, 8192}}, {"cross_attention_dim", 32}}).status == 201);
}
