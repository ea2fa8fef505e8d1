// The coordinator's HTTP/1.1 front end through raw sockets, request framing: pipelined requests
// answered in order, framing errors with their status and the JSON envelope, chunked and
// 100-continue bodies, HTTP/1.0 keep-alive, HEAD (an API route, a blob range), and blob URLs
// checked before a worker is taken.
#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <vector>

#include "shared/sha256.h"
#include "tests/integration/http_frontend_util.h"

using namespace gleaner;
using namespace gleaner::testing;

TEST_CASE("http front end: pipelined requests are answered in order on one connection",
          "[http][integration]") {
  TempDir dir("gleaner-http");
  auto coord = StartCoordinator(dir, FastArgs());
  const std::string body = R"({"kind":"synthetic","params":{"steps":10}})";
  RawConn c(coord->port());
  REQUIRE(c.connected());
  REQUIRE(
      c.Send(std::string(kHealthz) +
             PostHead("/v1/jobs", "", "Content-Length: " + std::to_string(body.size()) + "\r\n") +
             body + kHealthz));
  auto first = c.ReadResponse();
  auto second = c.ReadResponse();
  auto third = c.ReadResponse();
  REQUIRE(first);
  REQUIRE(second);
  REQUIRE(third);
  CHECK(first->status == 200);
  CHECK(second->status == 401);
  CHECK(IsErrorEnvelope(*second, "unauthenticated"));
  CHECK(third->status == 200);
  for (const HttpResult* r : {&*first, &*second, &*third}) {
    CHECK(r->Header("Connection").empty());
    CHECK(!r->Header("X-Request-Id").empty());
  }
  CHECK(first->Header("X-Request-Id") != third->Header("X-Request-Id"));
  CHECK(c.buffered().empty());
  // The connection goes on serving; a HEAD's answer has no body, so the next one follows it.
  REQUIRE(c.Send("HEAD /healthz HTTP/1.1\r\nHost: test\r\n\r\n" + std::string(kHealthz)));
  auto head = c.ReadResponse(Millis(3000), /*head_only=*/true);
  auto after_head = c.ReadResponse();
  REQUIRE(head);
  REQUIRE(after_head);
  CHECK(head->status == 200);
  CHECK(head->Header("Content-Length") == std::to_string(third->body.size()));
  CHECK(after_head->status == 200);
  CHECK(after_head->body == third->body);
  CHECK(c.buffered().empty());
}

TEST_CASE("http front end: framing errors get their status, the envelope and Connection close",
          "[http][integration]") {
  TempDir dir("gleaner-http");
  auto coord = StartCoordinator(dir, FastArgs());
  struct Case {
    const char* what;
    std::string request;
    int status;
    const char* code;
  };
  const std::vector<Case> cases = {
      {"head over 16 KiB",
       "GET /healthz HTTP/1.1\r\nHost: test\r\nX-Big: " + std::string(20000, 'a') + "\r\n\r\n", 431,
       "headers_too_large"},
      {"request-target over 8 KiB",
       "GET /" + std::string(9000, 'a') + " HTTP/1.1\r\nHost: test\r\n\r\n", 414, "uri_too_long"},
      {"HTTP/2.0", "GET /healthz HTTP/2.0\r\nHost: test\r\n\r\n", 505,
       "http_version_not_supported"},
      {"Content-Length and Transfer-Encoding",
       PostHead("/v1/jobs", "", "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n") +
           "0\r\n\r\n",
       400, "bad_request"},
      {"bad chunk size",
       PostHead("/v1/jobs", "", "Transfer-Encoding: chunked\r\n") + "zz\r\nhello\r\n0\r\n\r\n", 400,
       "bad_request"},
  };
  for (const Case& k : cases) {
    INFO(k.what);
    RawConn c(coord->port());
    REQUIRE(c.connected());
    REQUIRE(c.Send(k.request));
    auto r = c.ReadResponse();
    REQUIRE(r);
    INFO(r->Describe());
    CHECK(r->status == k.status);
    CHECK(IsErrorEnvelope(*r, k.code));
    CHECK(r->Header("Content-Type").find("application/json") == 0);
    CHECK(Lower(r->Header("Connection")) == "close");
    CHECK(c.WaitEof(Millis(3000)));
    CHECK(c.buffered().empty());
  }
  CHECK(ServesHealthz(coord->port()));
}

TEST_CASE("http front end: chunked and 100-continue request bodies on an API route",
          "[http][integration]") {
  TempDir dir("gleaner-http");
  auto coord = StartCoordinator(dir, FastArgs({"--max-body", "4096"}));
  std::string error;
  auto token = CreateKey(*coord, "developer", &error);
  INFO(error);
  REQUIRE(token);
  const std::string body = R"({"kind":"synthetic","params":{"steps":12,"checkpoint_every":4}})";
  const std::string length = "Content-Length: " + std::to_string(body.size()) + "\r\n";
  RawConn c(coord->port());
  REQUIRE(c.connected());

  // The same job with Content-Length and chunked (pieces, an extension, a trailer).
  REQUIRE(c.Send(PostHead("/v1/jobs", *token, length) + body));
  auto plain = c.ReadResponse();
  REQUIRE(plain);
  INFO(plain->Describe());
  REQUIRE(plain->status == 201);
  REQUIRE(
      c.Send(PostHead("/v1/jobs", *token, "Transfer-Encoding: chunked\r\n") + Chunked(body, 7)));
  auto chunked = c.ReadResponse();
  REQUIRE(chunked);
  INFO(chunked->Describe());
  REQUIRE(chunked->status == 201);
  HttpClient dev = coord->Client(*token);
  Json a = dev.Get("/v1/jobs/" + plain->json()["id"].get<std::string>()).json();
  Json b = dev.Get("/v1/jobs/" + chunked->json()["id"].get<std::string>()).json();
  REQUIRE(a.is_object());
  REQUIRE(b.is_object());
  CHECK(a["kind"] == "synthetic");
  CHECK(a["params"]["steps"] == 12);
  // Alike but for the id and the times.
  for (Json* j : {&a, &b}) {
    j->erase("id");
    for (auto it = j->begin(); it != j->end();) {
      it = it.key().find("_at") != std::string::npos ? j->erase(it) : std::next(it);
    }
  }
  CHECK(a == b);

  // Expect: 100-continue: the interim answer comes before the body is sent.
  REQUIRE(c.Send(PostHead("/v1/jobs", *token, length + "Expect: 100-continue\r\n")));
  auto interim = c.ReadResponse();
  REQUIRE(interim);
  CHECK(interim->status == 100);
  CHECK(c.buffered().empty());
  REQUIRE(c.Send(body));
  auto final_answer = c.ReadResponse();
  REQUIRE(final_answer);
  CHECK(final_answer->status == 201);

  // Over --max-body with Expect: 413 at once, no 100, and the connection ends.
  RawConn big(coord->port());
  REQUIRE(big.connected());
  REQUIRE(
      big.Send(PostHead("/v1/jobs", *token, "Content-Length: 5000\r\nExpect: 100-continue\r\n")));
  auto refused = big.ReadResponse();
  REQUIRE(refused);
  INFO(refused->Describe());
  CHECK(refused->status == 413);
  CHECK(IsErrorEnvelope(*refused, "too_large"));
  CHECK(Lower(refused->Header("Connection")) == "close");
  CHECK(big.WaitEof(Millis(3000)));
  CHECK(big.buffered().empty());

  // A chunked body that grows past --max-body: 413 too.
  RawConn grows(coord->port());
  REQUIRE(grows.connected());
  REQUIRE(grows.Send(PostHead("/v1/jobs", *token, "Transfer-Encoding: chunked\r\n") +
                     Chunked(std::string(6000, ' '), 1000)));
  auto too_big = grows.ReadResponse();
  REQUIRE(too_big);
  CHECK(too_big->status == 413);
  CHECK(IsErrorEnvelope(*too_big, "too_large"));

  // The keep-alive connection is still good.
  REQUIRE(c.Send(kHealthz));
  auto after = c.ReadResponse();
  REQUIRE(after);
  CHECK(after->status == 200);
}

TEST_CASE("http front end: HTTP/1.0 closes unless keep-alive is asked for", "[http][integration]") {
  TempDir dir("gleaner-http");
  auto coord = StartCoordinator(dir, FastArgs());

  RawConn once(coord->port());
  REQUIRE(once.connected());
  REQUIRE(once.Send("GET /healthz HTTP/1.0\r\n\r\n"));
  auto r = once.ReadResponse();
  REQUIRE(r);
  CHECK(r->status == 200);
  CHECK(Lower(r->Header("Connection")) == "close");
  CHECK(once.WaitEof(Millis(2000)));
  CHECK(once.buffered().empty());

  RawConn kept(coord->port());
  REQUIRE(kept.connected());
  for (int i = 0; i < 3; ++i) {
    INFO("request " << i);
    REQUIRE(kept.Send("GET /healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"));
    auto k = kept.ReadResponse();
    REQUIRE(k);
    CHECK(k->status == 200);
    CHECK(Lower(k->Header("Connection")) == "keep-alive");
    CHECK(!kept.eof());
  }
}

TEST_CASE("http front end: HEAD of a blob range sends the range's headers and no body",
          "[http][integration]") {
  TempDir dir("gleaner-http");
  auto coord = StartCoordinator(dir, FastArgs());
  std::string error;
  auto dev_token = CreateKey(*coord, "developer", &error);
  auto enroll = CreateKey(*coord, "enroll", &error);
  INFO(error);
  REQUIRE(dev_token);
  REQUIRE(enroll);
  HttpClient dev = coord->Client(*dev_token);

  std::string data;
  for (int i = 0; i < 100000; ++i) data.push_back(char('a' + i % 26));
  HttpResult up =
      dev.Post("/v1/uploads",
               {{"name", "data.bin"}, {"size", int64_t(data.size())}, {"sha256", Sha256Hex(data)}});
  INFO(up.Describe());
  REQUIRE(up.status / 100 == 2);
  const std::string uri = up.json()["uri"].get<std::string>();
  REQUIRE(HttpClient::Fetch("PUT", up.json()["url"].get<std::string>(), data).status / 100 == 2);
  // A GET URL comes with work: a job using the upload, claimed by a node.
  auto node = RegisterNode(*coord, *enroll, "m-http", 24000, &error);
  REQUIRE(node);
  REQUIRE(SubmitSyntheticJob(dev, 10, 5, &error,
                             {{"dataset", {{"uri", uri}, {"sha256", Sha256Hex(data)}}}}));
  HttpResult work = coord->Client(node->token).Post("/v1/work", Json::object());
  INFO(work.Describe());
  REQUIRE(work.status == 200);
  const std::string url = work.json()["inputs"]["dataset"]["url"].get<std::string>();
  REQUIRE(url.rfind(coord->url(), 0) == 0);
  const std::string target = url.substr(coord->url().size());

  // HEAD with a Range, then GET /healthz pipelined behind it: the second answer follows the
  // first head directly (no body bytes in between).
  RawConn c(coord->port());
  REQUIRE(c.connected());
  REQUIRE(c.Send("HEAD " + target + " HTTP/1.1\r\nHost: test\r\nRange: bytes=1000-1009\r\n\r\n" +
                 kHealthz));
  auto head = c.ReadResponse(Millis(3000), /*head_only=*/true);
  REQUIRE(head);
  INFO(head->Describe());
  CHECK(head->status == 206);
  CHECK(head->Header("Content-Length") == "10");
  CHECK(head->Header("Content-Range") == "bytes 1000-1009/" + std::to_string(data.size()));
  CHECK(head->body.empty());
  auto next = c.ReadResponse();
  REQUIRE(next);
  INFO(next->Describe());
  CHECK(next->status == 200);
  CHECK(next->json().is_object());
  // The same range by GET on the same connection has those 10 bytes.
  REQUIRE(c.Send("GET " + target + " HTTP/1.1\r\nHost: test\r\nRange: bytes=1000-1009\r\n\r\n"));
  auto got = c.ReadResponse();
  REQUIRE(got);
  CHECK(got->status == 206);
  CHECK(got->body == data.substr(1000, 10));
  CHECK(c.buffered().empty());
}

TEST_CASE(
    "http front end: blob requests with a bad signature are refused at once and hold no "
    "worker",
    "[http][integration]") {
  TempDir dir("gleaner-http");
  // Two blob workers and a long I/O timeout: a worker waiting for a body that never comes would
  // hold every later blob request back for seconds.
  auto coord = StartCoordinator(dir, FastArgs({"--threads", "2", "--io-timeout", "5"}));
  const std::string query = "?m=GET&exp=9999999999&sig=" + std::string(64, '0');
  std::vector<std::unique_ptr<RawConn>> clients;
  std::vector<SteadyTime::time_point> sent;
  // Each announces a body and sends none of it.
  for (const char* method : {"GET", "PUT", "GET", "PUT"}) {
    clients.push_back(std::make_unique<RawConn>(coord->port()));
    REQUIRE(clients.back()->connected());
    REQUIRE(clients.back()->Send(std::string(method) + " /blobs/somekey" + query +
                                 " HTTP/1.1\r\nHost: test\r\nContent-Length: 1000\r\n\r\n"));
    sent.push_back(SteadyTime::now());
  }
  for (size_t i = 0; i < clients.size(); ++i) {
    INFO("client " << i);
    auto r = clients[i]->ReadResponse(Millis(8000));
    REQUIRE(r);
    INFO(r->Describe());
    CHECK(SecondsSince(sent[i]) < 1.0);
    CHECK(r->status == 403);
    CHECK(IsErrorEnvelope(*r, "forbidden"));
    CHECK(Lower(r->Header("Connection")) == "close");
  }
  // Without a body the refusal keeps the connection.
  RawConn plain(coord->port());
  REQUIRE(plain.connected());
  REQUIRE(plain.Send("GET /blobs/somekey" + query + " HTTP/1.1\r\nHost: test\r\n\r\n" + kHealthz));
  auto refused = plain.ReadResponse();
  auto next = plain.ReadResponse();
  REQUIRE(refused);
  REQUIRE(next);
  CHECK(refused->status == 403);
  CHECK(refused->Header("Connection").empty());
  CHECK(next->status == 200);
}
