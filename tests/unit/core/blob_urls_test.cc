// Built-in blob URL signing/verification, S3 SigV4 presigning, and S3 mode end to end.
#include "coordinator/core/blob_urls.h"

#include "coordinator/core/s3_presign.h"
#include "tests/unit/core/test_env.h"

using namespace gleaner;
using namespace gleaner::testing;
using core::GetUrl;
using core::PutUrl;
using core::VerifyBlobUrl;

namespace {
std::string QueryOf(const std::string& url) {
  return url.substr(url.find('?') + 1);
}
std::string PathOf(const std::string& url) {
  size_t start = url.find("/blobs/");
  return url.substr(start, url.find('?') - start);
}
std::string Replace(std::string s, const std::string& from, const std::string& to) {
  size_t p = s.find(from);
  REQUIRE(p != std::string::npos);
  return s.replace(p, from.size(), to);
}
}  // namespace

TEST_CASE("blob URLs: sign and verify PUT and GET", "[blob]") {
  CoreConfig c = TestConfig();
  const int64_t now = 1800000000000;
  std::string sha = Sha256Hex("x");
  auto put = PutUrl(c, "uploads/u_1/data.bin", 1234, sha, now);
  CHECK(put.url ==
        "http://blobs.test/blobs/uploads/u_1/data.bin?m=PUT&exp=1800000900&max=1234&sha=" + sha +
            "&sig=" + QueryOf(put.url).substr(QueryOf(put.url).find("sig=") + 4));
  CHECK(put.expires_at_ms == now + 900000);
  auto g = VerifyBlobUrl(c, "PUT", PathOf(put.url), QueryOf(put.url), now);
  REQUIRE(g.ok());
  CHECK(g->key == "uploads/u_1/data.bin");
  CHECK(g->method == "PUT");
  CHECK(g->max_size == 1234);
  CHECK(g->sha256 == sha);
  auto get = GetUrl(c, "jobs/j_1/out/e1/chain.txt", now);
  auto gg = VerifyBlobUrl(c, "GET", PathOf(get.url), QueryOf(get.url), now);
  REQUIRE(gg.ok());
  CHECK(gg->method == "GET");
  CHECK(VerifyBlobUrl(c, "HEAD", PathOf(get.url), QueryOf(get.url), now).ok());
  // The Coordinator entry point is the same check.
  core::Coordinator coord(c);
  CHECK(coord.AuthorizeBlob("GET", PathOf(get.url), QueryOf(get.url), now).ok());
}

TEST_CASE("blob URLs: expiry, wrong method and every tampering are 403", "[blob]") {
  CoreConfig c = TestConfig();
  const int64_t now = 1800000000000;
  auto put = PutUrl(c, "jobs/j_1/ckpt/e1/s0000000010", 100, "", now);
  std::string path = PathOf(put.url), query = QueryOf(put.url);
  auto denied = [&](const std::string& method, const std::string& p, const std::string& q,
                    int64_t at) {
    auto r = VerifyBlobUrl(c, method, p, q, at);
    return !r.ok() && r.status().code() == Code::kPermissionDenied;
  };
  CHECK_FALSE(denied("PUT", path, query, now + 900000));  // valid through its expiry second
  CHECK(denied("PUT", path, query, now + 901000));
  CHECK(denied("GET", path, query, now));
  CHECK(denied("PUT", Replace(path, "s0000000010", "s0000000011"), query, now));
  CHECK(denied("PUT", path, Replace(query, "max=100", "max=1000"), now));
  CHECK(denied("PUT", path, Replace(query, "exp=1800000900", "exp=1800009000"), now));
  CHECK(denied("PUT", path, query + "&sha=" + Sha256Hex("y"), now));
  CHECK(denied("PUT", path, Replace(query, "m=PUT", "m=GET"), now));
  std::string sig = query.substr(query.find("sig=") + 4);
  std::string flipped = sig;
  flipped[0] = flipped[0] == 'a' ? 'b' : 'a';
  CHECK(denied("PUT", path, Replace(query, sig, flipped), now));
  CHECK(denied("PUT", path, query.substr(0, query.find("&sig=")), now));
  CHECK(denied("PUT", "/other/x", query, now));
  CoreConfig other = c;
  other.blob_signing_key = "another-key-another-key-another";
  CHECK_FALSE(VerifyBlobUrl(other, "PUT", path, query, now).ok());
  CHECK(denied("PUT", "/blobs/../etc/passwd", query, now));
  CHECK(denied("GET", "/blobs/", "", now));
}

TEST_CASE("blob keys and names", "[blob]") {
  CHECK(core::IsValidBlobKey("jobs/j_1/ckpt/e1/s0000000010"));
  for (const char* bad : {"", "/a", "a/", "a//b", "a/../b", "./a", "a b", "a\\b", "%2e"}) {
    INFO(bad);
    CHECK_FALSE(core::IsValidBlobKey(bad));
  }
  CHECK(core::SanitizeName("../../etc/passwd") == "_.._etc_passwd");
  CHECK(core::SanitizeName("...") == "file");
  CHECK(
      core::SanitizeName("ünï cøde.txt")
          .find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") ==
      std::string::npos);
  CHECK(core::SanitizeName(std::string(500, 'a')).size() == 128);
  CHECK(core::IsSafeName("lora.safetensors"));
  CHECK_FALSE(core::IsSafeName(".x"));
}

TEST_CASE("SigV4 presign matches the AWS documentation example", "[blob][s3]") {
  core::S3Config s3;
  s3.endpoint = "https://s3.amazonaws.com";
  s3.bucket = "examplebucket";
  s3.region = "us-east-1";
  s3.access_key_id = "AKIAIOSFODNN7EXAMPLE";
  s3.secret_access_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
  s3.path_style = false;
  int64_t t = 1369353600000;  // 2013-05-24T00:00:00Z
  CHECK(core::PresignS3(s3, "GET", "test.txt", t, 86400) ==
        "https://examplebucket.s3.amazonaws.com/test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256"
        "&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request"
        "&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host"
        "&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404");
  // Default ports are not part of the signed host.
  s3.endpoint = "https://s3.amazonaws.com:443";
  CHECK(core::PresignS3(s3, "GET", "test.txt", t, 86400).find("aeeed9bb") != std::string::npos);
}

TEST_CASE("SigV4 path-style keeps the port and puts the bucket in the path", "[blob][s3]") {
  core::S3Config s3;
  s3.endpoint = "http://127.0.0.1:4568";
  s3.bucket = "gleaner";
  s3.access_key_id = "S3RVER";
  s3.secret_access_key = "S3RVER";
  std::string url = core::PresignS3(s3, "PUT", "jobs/j_1/ckpt/e1/s0000000010", 1800000000000, 900);
  CHECK(url.rfind("http://127.0.0.1:4568/gleaner/jobs/j_1/ckpt/e1/s0000000010?X-Amz-Algorithm=",
                  0) == 0);
  CHECK(url.find("X-Amz-Expires=900") != std::string::npos);
  // Different method, different signature.
  std::string get = core::PresignS3(s3, "GET", "jobs/j_1/ckpt/e1/s0000000010", 1800000000000, 900);
  CHECK(get.substr(get.find("X-Amz-Signature=")) != url.substr(url.find("X-Amz-Signature=")));
}

TEST_CASE("S3 mode: URLs are presigned and commits take the agent's word", "[blob][s3]") {
  CoreConfig c = TestConfig();
  c.s3.endpoint = "http://127.0.0.1:4568";
  c.s3.bucket = "gleaner";
  c.s3.access_key_id = "S3RVER";
  c.s3.secret_access_key = "S3RVER";
  TestEnv env(c);
  std::string dev = env.Developer();
  Resp up =
      env.Post("/v1/uploads", dev, {{"name", "d.bin"}, {"size", 3}, {"sha256", Sha256Hex("abc")}});
  REQUIRE(up.status == 201);
  CHECK(up.json["url"].get<std::string>().rfind("http://127.0.0.1:4568/gleaner/uploads/", 0) == 0);
  std::string job = env.Submit(dev, 20);
  NodeRef n = env.Node("n");
  REQUIRE(env.ClaimedJob(n) == job);
  std::string sha = Sha256Hex("ckpt");
  // The agent asks for the URL first (the coordinator records what it minted, lease_quota.h).
  REQUIRE(
      env.Post("/v1/jobs/" + job + "/checkpoints", n.token, {{"epoch", 1}, {"step", 10}}).status ==
      200);
  Resp commit = env.Post("/v1/jobs/" + job + "/checkpoints/10/commit", n.token,
                         {{"epoch", 1}, {"sha256", sha}, {"size", 4}});
  CHECK(commit.status == 200);
  REQUIRE(env.Heartbeat(n, job, 1, 20).status == 200);
  Resp done =
      env.Post("/v1/jobs/" + job + "/complete", n.token,
               {{"epoch", 1},
                {"outputs", Json::array({{{"name", "chain.txt"}, {"sha256", sha}, {"size", 4}}})}});
  CHECK(done.status == 200);
  Resp result = env.Get("/v1/jobs/" + job + "/result", dev);
  CHECK(result.json["outputs"][0]["url"].get<std::string>().find("X-Amz-Signature=") !=
        std::string::npos);
}
