// POST /v1/agent/releases and GET /v1/agent/release: shape checks, newest by version, roles.
#include "shared/release_manifest.h"
#include "test_env.h"

using namespace gleaner;
using namespace gleaner::testing;

namespace {

std::string ManifestText(const std::string& version, const std::string& platform,
                         const std::string& channel = "stable") {
  return R"({"version":")" + version + R"(","channel":")" + channel +
         R"(","expires":2000000000,"artifacts":{")" + platform +
         R"(":{"uri":"https://example.test/a","length":10,"sha256":")" + std::string(64, 'a') +
         R"("}}})";
}

Json Envelope(const std::string& manifest) {
  return {{"manifest", manifest},
          {"key_id", std::string(16, '0')},
          {"signature", std::string(128, '1')}};
}

}  // namespace

TEST_CASE("releases: publish, then nodes get the newest by version for their platform",
          "[releases]") {
  TestEnv env;
  for (const char* v : {"1.9.0", "1.10.0", "1.2.0"}) {
    Resp r = env.Post("/v1/agent/releases", env.operator_token,
                      Envelope(ManifestText(v, "linux-x86_64")));
    INFO(r.body);
    REQUIRE(r.status == 201);
    CHECK(r.json["version"] == v);
  }
  REQUIRE(env.Post("/v1/agent/releases", env.operator_token,
                   Envelope(ManifestText("2.0.0", "linux-arm64")))
              .status == 201);
  REQUIRE(env.Post("/v1/agent/releases", env.operator_token,
                   Envelope(ManifestText("3.0.0", "linux-x86_64", "beta")))
              .status == 201);
  NodeRef node = env.Node("m1");
  Resp r = env.Get("/v1/agent/release?platform=linux-x86_64", node.token);
  INFO(r.body);
  REQUIRE(r.status == 200);
  CHECK(r.json["version"] == "1.10.0");
  CHECK(r.json["channel"] == "stable");
  // The envelope comes back byte-for-byte usable by the agent.
  Result<release::Envelope> env_back = release::ParseEnvelope(DumpJson(r.json["release"]));
  REQUIRE(env_back.ok());
  CHECK(env_back->manifest_text == ManifestText("1.10.0", "linux-x86_64"));

  CHECK(
      env.Get("/v1/agent/release?platform=linux-x86_64&channel=beta", node.token).json["version"] ==
      "3.0.0");
  CHECK(env.Get("/v1/agent/release?platform=linux-arm64", env.operator_token).json["version"] ==
        "2.0.0");
  CHECK(env.Get("/v1/agent/release?platform=windows", node.token).status == 404);
  CHECK(env.Get("/v1/agent/release", node.token).status == 400);
  CHECK(env.Get("/v1/agent/release?platform=Linux/x", node.token).status == 400);
  CHECK(env.Get("/v1/agent/release?platform=linux-x86_64&channel=B%20", node.token).status == 400);
}

TEST_CASE("releases: malformed, duplicate and wrong-role publishes are refused", "[releases]") {
  TestEnv env;
  Json ok = Envelope(ManifestText("1.0.0", "linux-x86_64"));
  REQUIRE(env.Post("/v1/agent/releases", env.operator_token, ok).status == 201);
  Resp dup = env.Post("/v1/agent/releases", env.operator_token, ok);
  CHECK(dup.status == 409);
  CHECK(dup.ErrorCode() == "conflict");

  Json bad_sig = ok;
  bad_sig["signature"] = "zz";
  Json bad_manifest = Envelope(R"({"version":"1.0"})");
  Json extra = ok;
  extra["more"] = 1;
  for (const Json& body : {bad_sig, bad_manifest, extra, Json::object()}) {
    Resp r = env.Post("/v1/agent/releases", env.operator_token, body);
    INFO(r.body);
    CHECK(r.status == 400);
  }
  NodeRef node = env.Node("m1");
  CHECK(env.Post("/v1/agent/releases", node.token, ok).status == 403);
  CHECK(env.Post("/v1/agent/releases", env.Developer(), ok).status == 403);
  CHECK(env.Get("/v1/agent/release?platform=linux-x86_64", env.Developer()).status == 403);
}
