// Blob transfers cannot be held by a slow or greedy client: a body slower than the minimum rate
// is cut off (408), one upload URL holds at most one worker, and while dozens of connections
// dribble bytes at an upload URL a normal download still answers at once.
#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "shared/sha256.h"
#include "tests/integration/coordinator_fixture.h"
#include "tests/integration/harness.h"
#include "tests/integration/raw_http.h"

using namespace gleaner;
using namespace gleaner::testing;

namespace {

struct Upload {
  std::string url, key;
};

Upload Mint(HttpClient& dev, const std::string& name, const std::string& bytes) {
  HttpResult r =
      dev.Post("/v1/uploads",
               {{"name", name}, {"size", int64_t(bytes.size())}, {"sha256", Sha256Hex(bytes)}});
  INFO(r.Describe());
  REQUIRE(r.status / 100 == 2);
  return {r.json()["url"].get<std::string>(), r.json()["uri"].get<std::string>().substr(7)};
}

// "PUT /blobs/...?... HTTP/1.1" head for a signed URL, announcing size bytes.
std::string PutHead(const std::string& url, size_t size) {
  std::string target = url.substr(url.find("/blobs/"));
  return "PUT " + target + " HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(size) +
         "\r\n\r\n";
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

}  // namespace

TEST_CASE("blob limits: a dribbled body is cut off at the minimum rate, not per byte",
          "[coordinator][blobs][limits]") {
  TempDir dir;
  CoordinatorOptions o;
  o.extra_args = {"--blob-min-rate", "1000", "--blob-rate-grace", "1", "--io-timeout", "30"};
  CoordinatorProcess coord(dir.path(), o);
  std::string error;
  REQUIRE(coord.Start(&error));
  auto dev_token = CreateKey(coord, "developer", &error);
  REQUIRE(dev_token);
  HttpClient dev = coord.Client(*dev_token);
  const std::string data(5000, 'x');
  Upload up = Mint(dev, "data.bin", data);

  RawConn slow(coord.port());
  REQUIRE(slow.connected());
  const auto start = std::chrono::steady_clock::now();
  REQUIRE(slow.Send(PutHead(up.url, data.size())));
  // A byte every 200 ms: each one arrives well within io-timeout, the average far below 1000/s.
  std::optional<HttpResult> answer;
  while (!answer && Seconds(start) < 10) {
    slow.Send("x");
    answer = slow.ReadResponse(Millis(200));
  }
  REQUIRE(answer.has_value());
  CHECK(answer->status == 408);
  CHECK(answer->json()["error"]["code"] == "request_timeout");
  CHECK(Seconds(start) < 4);  // grace 1 s + the few bytes' share, not 30 s per byte
  // The upload URL is free again: a normal PUT stores the object.
  CHECK(HttpClient::Fetch("PUT", up.url, data).status == 204);
}

TEST_CASE("blob limits: one upload per key, and dribbling connections do not starve downloads",
          "[coordinator][blobs][limits]") {
  TempDir dir;
  CoordinatorOptions o;
  o.extra_args = {"--threads", "16", "--io-timeout", "30"};
  CoordinatorProcess coord(dir.path(), o);
  std::string error;
  REQUIRE(coord.Start(&error));
  auto dev_token = CreateKey(coord, "developer", &error);
  REQUIRE(dev_token);
  HttpClient dev = coord.Client(*dev_token);
  // An object to download later: stored, used by a job, its GET URL handed to a node.
  const std::string stored(100000, 's');
  Upload data = Mint(dev, "stored.bin", stored);
  REQUIRE(HttpClient::Fetch("PUT", data.url, stored).status == 204);
  auto enroll = CreateKey(coord, "enroll", &error);
  REQUIRE(enroll);
  auto node = RegisterNode(coord, *enroll, "m-limits", 24000, &error);
  REQUIRE(node);
  auto job = SubmitSyntheticJob(
      dev, 10, 5, &error,
      {{"dataset", {{"uri", "blob://" + data.key}, {"sha256", Sha256Hex(stored)}}}});
  REQUIRE(job);
  HttpResult work = coord.Client(node->token).Post("/v1/work", Json::object());
  REQUIRE(work.status == 200);
  const std::string get_url = work.json()["inputs"]["dataset"]["url"].get<std::string>();

  const std::string big(1000000, 'b');
  Upload target = Mint(dev, "target.bin", big);
  // 70 connections announce a body for one upload URL and dribble bytes.
  std::vector<std::unique_ptr<RawConn>> conns;
  for (int i = 0; i < 70; ++i) {
    conns.push_back(std::make_unique<RawConn>(coord.port()));
    REQUIRE(conns.back()->connected());
    REQUIRE(conns.back()->Send(PutHead(target.url, big.size()) + "y"));
  }
  // All but one are refused at once (503, retry): an upload to this key is in progress.
  int refused = 0;
  for (auto& c : conns) {
    std::optional<HttpResult> r = c->ReadResponse(Millis(500));
    if (r && r->status == 503 && r->Header("Retry-After") == "1") ++refused;
  }
  CHECK(refused == 69);
  for (auto& c : conns) c->Send("y");
  // A signed download answers at once, whole.
  const auto start = std::chrono::steady_clock::now();
  HttpResult got = HttpClient::Fetch("GET", get_url);
  CHECK(got.status == 200);
  CHECK(got.body == stored);
  CHECK(Seconds(start) < 2);
}
