#include "agent/supervisor/api.h"

#include <catch2/catch.hpp>

#include "fake_http.h"

using namespace gleaner;
using namespace gleaner::agent;
using gleaner::testing::FakeHttp;
using gleaner::testing::Reply;

TEST_CASE("HTTP statuses map onto Status codes the agent acts on", "[api]") {
  CHECK(StatusFromHttp(200, "").ok());
  CHECK(StatusFromHttp(204, "").ok());
  CHECK(StatusFromHttp(409, R"({"error":{"code":"conflict","message":"lease lost"}})").code() ==
        Code::kConflict);
  CHECK(StatusFromHttp(409, R"({"error":{"code":"stale_checkpoint","message":"old"}})").code() ==
        Code::kInvalidArgument);
  CHECK(StatusFromHttp(503, "").code() == Code::kUnavailable);
  CHECK(StatusFromHttp(429, "").code() == Code::kUnavailable);
  CHECK(StatusFromHttp(401, "").code() == Code::kUnauthenticated);
  CHECK(StatusFromHttp(404, "not json").code() == Code::kNotFound);
  Status s =
      StatusFromHttp(400, R"({"error":{"code":"bad_request","message":"epoch is required"}})");
  CHECK(s.message().find("epoch is required") != std::string::npos);
}

TEST_CASE("a work response parses into an assignment", "[api]") {
  auto j = ParseJson(R"({"job":{"id":"j_1","kind":"synthetic","params":{"steps":50},"steps":50},
    "lease":{"epoch":3,"expires_at":"x","heartbeat_interval":0.25},
    "inputs":{"dataset":{"url":"http://s/d","sha256":")" +
                     std::string(64, 'a') + R"(","size":10}},
    "resume":{"step":20,"url":"/blobs/c","sha256":")" +
                     std::string(64, 'b') + R"(","size":99}})");
  REQUIRE(j.ok());
  auto a = ParseAssignment(*j);
  REQUIRE(a.ok());
  CHECK(a->job_id == "j_1");
  CHECK(a->kind == "synthetic");
  CHECK(a->steps == 50);
  CHECK(a->epoch == 3);
  CHECK(a->heartbeat_interval_s == 0.25);
  REQUIRE(a->inputs.size() == 1);
  CHECK(a->inputs[0].name == "dataset");
  CHECK(a->inputs[0].size == 10);
  REQUIRE(a->resume.has_value());
  CHECK(a->resume_step == 20);
  CHECK(a->resume->size == 99);

  for (const char* bad : {R"({})", R"({"job":{"id":"j"}})", R"({"job":{"id":"j","kind":"s"}})",
                          R"({"job":{"id":"j","kind":"s"},"lease":{"epoch":"1"}})", R"([1])"}) {
    INFO(bad);
    CHECK_FALSE(ParseAssignment(*ParseJson(bad)).ok());
  }
}

TEST_CASE("the claim's model format is kept as sent, or implied by an older coordinator", "[api]") {
  const std::string sha(64, 'a');
  auto claim = [&](const std::string& model) {
    return ParseAssignment(*ParseJson(
        R"({"job":{"id":"j_1","kind":"lora-sd","params":{"steps":5},"steps":5},
        "lease":{"epoch":1},"inputs":{"model":)" +
        model + R"(,"dataset":{"url":"u","sha256":")" + sha + R"(","size":1}}})"));
  };
  const std::string file = R"({"url":"u","sha256":")" + sha + R"(","size":3)";
  const std::string folder = R"({"files":[{"path":"unet/config.json","url":"u","sha256":")" + sha +
                             R"(","size":2},{"path":"vae/config.json","url":"v","sha256":")" + sha +
                             R"(","size":2}])";
  struct Case {
    std::string model, format;
  } cases[] = {
      {file + R"(,"format":"unet-safetensors"})", "unet-safetensors"},
      {folder + R"(,"format":"diffusers"})", "diffusers"},
      {file + "}", "unet-safetensors"},  // an older coordinator: one file is the UNet weights
      {folder + "}", "diffusers"},       // and a folder a diffusers model
      {file + R"(,"format":"flux-single-file"})", "flux-single-file"},  // kept: the runner decides
  };
  for (const Case& c : cases) {
    INFO(c.model);
    auto a = claim(c.model);
    REQUIRE(a.ok());
    for (const RemoteObject& in : a->inputs) {
      CHECK(in.format == (in.name == "model" ? c.format : ""));
    }
  }
  auto bad = claim(file + R"(,"format":7})");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message() == "model.format must be a string");
}

TEST_CASE("work: 204 honours Retry-After, transport errors are retryable", "[api]") {
  int calls = 0;
  FakeHttp http([&](const net::HttpCall& call) -> Result<net::HttpResponse> {
    ++calls;
    for (const auto& h : call.headers) {
      if (h.first == "Authorization") CHECK(h.second == "Bearer node-token");
    }
    if (calls == 1) {
      net::HttpResponse r = Reply(204, "");
      r.headers["retry-after"] = "7";
      return r;
    }
    return Status::Unavailable("connection refused");
  });
  CoordinatorApi api(&http, "http://coord:1/");
  api.SetToken("node-token");
  double retry_after = 0;
  auto w = api.Work(&retry_after);
  REQUIRE(w.ok());
  CHECK_FALSE(w->has_value());
  CHECK(retry_after == 7);
  auto w2 = api.Work(&retry_after);
  CHECK(w2.status().code() == Code::kUnavailable);
  CHECK(http.calls()[0] == "POST http://coord:1/v1/work");
  CHECK(api.Resolve("/blobs/x?sig=1") == "http://coord:1/blobs/x?sig=1");
  CHECK(api.Resolve("https://s3/x") == "https://s3/x");
}

TEST_CASE("fresh downloads: the claim's shape, 409 is a lost lease", "[api]") {
  const std::string sha(64, 'c');
  int calls = 0;
  FakeHttp http([&](const net::HttpCall& call) -> Result<net::HttpResponse> {
    ++calls;
    CHECK(call.body == R"({"epoch":4})");
    if (calls == 1) {
      return Reply(200, R"({"inputs":{"model":{"url":"/blobs/m?sig=2","sha256":")" + sha +
                            R"(","size":5}},"resume":{"step":30,"url":"/blobs/c?sig=2",)"
                            R"("sha256":")" +
                            sha + R"(","size":7}})");
    }
    return Reply(409, R"({"error":{"code":"conflict","message":"the lease expired"}})");
  });
  CoordinatorApi api(&http, "http://coord:1");
  auto d = api.FreshDownloads("j_1", 4);
  REQUIRE(d.ok());
  REQUIRE(d->inputs.size() == 1);
  CHECK(d->inputs[0].name == "model");
  CHECK(d->inputs[0].url == "/blobs/m?sig=2");
  REQUIRE(d->resume.has_value());
  CHECK(d->resume_step == 30);
  CHECK(d->resume->size == 7);
  CHECK(http.calls()[0] == "POST http://coord:1/v1/jobs/j_1/downloads");
  CHECK(api.FreshDownloads("j_1", 4).status().code() == Code::kConflict);
}

TEST_CASE("mangled work responses never crash the parser", "[api]") {
  std::string good = R"({"job":{"id":"j_1","kind":"synthetic","params":{"steps":50},"steps":50},
    "lease":{"epoch":3,"heartbeat_interval":0.25},"inputs":{"d":{"url":"u","sha256":"x","size":1}},
    "resume":{"step":20,"url":"/c","sha256":"y","size":99}})";
  uint32_t seed = 12345;
  auto next = [&seed] { return seed = seed * 1103515245u + 12345u; };
  int parsed = 0;
  for (int round = 0; round < 3000; ++round) {
    std::string s = good;
    int edits = 1 + int(next() % 4);
    for (int e = 0; e < edits; ++e) {
      size_t pos = next() % s.size();
      switch (next() % 3) {
        case 0:
          s[pos] = char(next() % 128);
          break;
        case 1:
          s.erase(pos, 1 + next() % 8);
          break;
        default:
          s.insert(pos, 1, "{}[]\",:0-e"[next() % 10]);
          break;
      }
      if (s.empty()) s = "x";
    }
    auto j = ParseJson(s);
    if (!j.ok()) continue;
    ++parsed;
    auto a = ParseAssignment(*j);  // ok or a clear error; never a crash
    if (a.ok()) CHECK(!a->job_id.empty());
  }
  CHECK(parsed > 0);
}

TEST_CASE("a verification lease: asked for with verify, parsed, its own routes", "[api]") {
  const std::string sha(64, 'd');
  const std::string claim =
      R"({"job":{"id":"j_1","kind":"synthetic","params":{"steps":40},"steps":40},
    "lease":{"epoch":2,"ttl_s":30},"inputs":{},
    "resume":{"step":10,"url":"/blobs/c","sha256":")" +
      sha + R"(","size":9},"verification":{"id":"v_7","stop_step":20,"round":1}})";
  std::vector<std::string> bodies;
  FakeHttp http([&](const net::HttpCall& call) -> Result<net::HttpResponse> {
    bodies.push_back(call.body);
    if (call.url.find("/v1/work") != std::string::npos) return Reply(200, claim);
    if (call.url.find("/heartbeat") != std::string::npos) {
      return Reply(200, R"({"cancel":true,"ttl_s":30})");
    }
    if (call.url.find("/checkpoint") != std::string::npos) {
      return Reply(200, R"({"key":"k","url":"/v1/blobs/k?sig=1","method":"PUT"})");
    }
    return Reply(409, R"({"error":{"code":"conflict","message":"the lease expired"}})");
  });
  CoordinatorApi api(&http, "http://coord:1");
  double retry_after = 0;
  auto w = api.Work(&retry_after, /*verify=*/true);
  REQUIRE(w.ok());
  REQUIRE(w->has_value());
  const Assignment& a = **w;
  CHECK(a.verification_id == "v_7");
  CHECK(a.stop_step == 20);
  CHECK(a.resume_step == 10);
  CHECK(a.epoch == 2);
  auto hb = api.VerificationHeartbeat("v_7", 2, 15);
  REQUIRE(hb.ok());
  CHECK(hb->cancel);
  auto url = api.VerificationCheckpointUrl("v_7", 2);
  REQUIRE(url.ok());
  CHECK(*url == "http://coord:1/v1/blobs/k?sig=1");
  CHECK(api.VerificationCommit("v_7", 2, sha, 9).code() == Code::kConflict);
  CHECK(http.calls() ==
        std::vector<std::string>{"POST http://coord:1/v1/work",
                                 "POST http://coord:1/v1/verifications/v_7/heartbeat",
                                 "POST http://coord:1/v1/verifications/v_7/checkpoint",
                                 "POST http://coord:1/v1/verifications/v_7/commit"});
  CHECK(bodies[0] == R"({"verify":true})");
  CHECK(bodies[1] == R"({"epoch":2,"step":15})");
  CHECK(bodies[3] == R"({"epoch":2,"sha256":")" + sha + R"(","size":9})");
  // A job lease asks with an empty body; a stop step not after the resume point is refused.
  REQUIRE(api.Work(&retry_after).ok());
  CHECK(bodies[4] == "{}");
  auto bad = ParseJson(R"({"job":{"id":"j","kind":"s","steps":40},"lease":{"epoch":1},
    "resume":{"step":20,"url":"/c","sha256":")" +
                       sha + R"("},"verification":{"id":"v","stop_step":20}})");
  REQUIRE(bad.ok());
  CHECK_FALSE(ParseAssignment(*bad).ok());
}

TEST_CASE("fail sends its cause (input or node) and the step the trainer reached", "[api]") {
  std::vector<std::string> bodies;
  FakeHttp http([&](const net::HttpCall& call) -> Result<net::HttpResponse> {
    bodies.push_back(call.body);
    return Reply(200, R"({"job_id":"j_1","state":"pending"})");
  });
  CoordinatorApi api(&http, "http://coord:1");
  REQUIRE(api.Fail("j_1", 3, "trainer exited with code 2: bad photo", FailCause::kInput, 7).ok());
  REQUIRE(api.Fail("j_1", 4, "trainer killed by signal 9", FailCause::kNode).ok());
  REQUIRE(api.Fail("j_1", 5, "x").ok());
  CHECK(http.calls() == std::vector<std::string>(3, "POST http://coord:1/v1/jobs/j_1/fail"));
  REQUIRE(bodies.size() == 3);
  Json input = *ParseJson(bodies[0]);
  CHECK(input == Json{{"epoch", 3},
                      {"reason", "trainer exited with code 2: bad photo"},
                      {"cause", "input"},
                      {"step", 7}});
  Json node = *ParseJson(bodies[1]);
  CHECK(node == Json{{"epoch", 4}, {"reason", "trainer killed by signal 9"}, {"cause", "node"}});
  CHECK((*ParseJson(bodies[2]))["cause"] == "node");  // the default
  CHECK(std::string(FailCauseName(FailCause::kInput)) == "input");
}
