// The coordinator's HTTP/1.1 front end through raw TCP: what a byte-level client sees from the
// real server. Slow clients are bounded by the head deadline (408) while others are served, idle
// connections time out, pipelined requests are answered in order, framing errors get their status
// and the JSON envelope, chunked and 100-continue bodies, HTTP/1.0 keep-alive, the connection
// limit, draining on SIGTERM, a HEAD of a blob range, blob URLs checked before a worker is
// taken, and the same deadlines over TLS.
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "shared/sha256.h"
#include "tests/integration/coordinator_fixture.h"
#include "tests/integration/raw_http.h"
#include "tests/integration/test_pki.h"

using namespace gleaner;
using namespace gleaner::testing;

namespace {

using SteadyTime = std::chrono::steady_clock;

double SecondsSince(SteadyTime::time_point t) {
  return std::chrono::duration<double>(SteadyTime::now() - t).count();
}

int MillisLeft(SteadyTime::time_point deadline) {
  auto left = std::chrono::duration_cast<Millis>(deadline - SteadyTime::now()).count();
  return int(std::max<int64_t>(0, left));
}

std::string Lower(std::string s) {
  for (char& ch : s) ch = char(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

const char kHealthz[] = "GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n";

// The flags every case starts from: short deadlines so that timeouts show within a second.
std::vector<std::string> FastArgs(std::vector<std::string> more = {}) {
  std::vector<std::string> args = {"--header-timeout",     "1", "--io-timeout", "1",
                                   "--keep-alive-timeout", "1"};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

std::unique_ptr<CoordinatorProcess> StartCoordinator(const TempDir& dir,
                                                     std::vector<std::string> args) {
  CoordinatorOptions o;
  o.extra_args = std::move(args);
  auto coord = std::make_unique<CoordinatorProcess>(dir.path(), o);
  std::string error;
  const bool started = coord->Start(&error);
  INFO(error);
  REQUIRE(started);
  return coord;
}

// The error envelope {"error":{"code","message"}} with this code.
bool IsErrorEnvelope(const HttpResult& r, const std::string& code) {
  Json j = r.json();
  return j.is_object() && j.contains("error") && j["error"].is_object() &&
         j["error"].contains("code") && j["error"]["code"] == code &&
         j["error"].contains("message") && j["error"]["message"].is_string() &&
         !j["error"]["message"].get<std::string>().empty();
}

// GET /healthz on a fresh connection answers 200.
bool ServesHealthz(int port) {
  RawConn c(port);
  if (!c.connected() || !c.Send(kHealthz)) return false;
  auto r = c.ReadResponse(Millis(2000));
  return r && r->status == 200;
}

std::string PostHead(const std::string& path, const std::string& token,
                     const std::string& framing) {
  std::string head =
      "POST " + path + " HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n";
  if (!token.empty()) head += "Authorization: Bearer " + token + "\r\n";
  return head + framing + "\r\n";
}

std::string Chunked(const std::string& body, size_t piece) {
  std::string out;
  for (size_t at = 0; at < body.size(); at += piece) {
    std::string part = body.substr(at, piece);
    char size[32];
    std::snprintf(size, sizeof size, "%zx", part.size());
    out += std::string(size) + (at == 0 ? ";note=first" : "") + "\r\n" + part + "\r\n";
  }
  return out + "0\r\nX-Trailer: done\r\n\r\n";
}

// Allows this process at least n descriptors (up to the hard limit).
void RaiseFdLimit(rlim_t n) {
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur >= n) return;
  lim.rlim_cur = std::min(n, lim.rlim_max);
  ::setrlimit(RLIMIT_NOFILE, &lim);
}

// Slow clients that each sent part of a request head get one more header line every 0.3 s until
// the server closes them or `limit` passes.
class SlowHeads {
 public:
  // n clients connected (over TLS with tls), each having sent a partial head.
  SlowHeads(int port, int n, SSL_CTX* tls = nullptr) {
    for (int i = 0; i < n; ++i) {
      conns_.push_back(std::make_unique<RawConn>(port, tls));
      REQUIRE(conns_.back()->connected());
      REQUIRE(conns_.back()->Send("GET /healthz HTTP/1.1\r\nHost: slow\r\n"));
      first_byte_.push_back(SteadyTime::now());
    }
    closed_after_.assign(size_t(n), -1);
  }

  // Dribbles until every client was closed (true) or limit passed (false).
  bool DribbleUntilClosed(Millis limit) {
    const auto start = SteadyTime::now();
    auto next_line = start + Millis(300);
    int line = 0;
    size_t open = conns_.size();
    while (open > 0 && SteadyTime::now() < start + limit) {
      std::vector<pollfd> fds;
      std::vector<size_t> who;
      for (size_t i = 0; i < conns_.size(); ++i) {
        if (closed_after_[i] >= 0) continue;
        fds.push_back({conns_[i]->fd(), POLLIN, 0});
        who.push_back(i);
      }
      ::poll(fds.data(), fds.size(), std::min(MillisLeft(next_line), 50));
      for (size_t k = 0; k < fds.size(); ++k) {
        if (fds[k].revents == 0) continue;
        conns_[who[k]]->Pump();
        if (conns_[who[k]]->eof()) {
          closed_after_[who[k]] = SecondsSince(first_byte_[who[k]]);
          --open;
        }
      }
      if (SteadyTime::now() >= next_line) {
        const std::string field = "X-Slow-" + std::to_string(line++) + ": 1\r\n";
        for (size_t i = 0; i < conns_.size(); ++i) {
          // Best effort: a client the server has just closed may fail to send.
          if (closed_after_[i] < 0) conns_[i]->Send(field, Millis(50));
        }
        next_line += Millis(300);
      }
    }
    return open == 0;
  }

  // Each client was answered 408 with the error envelope and Connection: close, then closed,
  // between `earliest` and `latest` seconds after its first byte.
  void Check(double earliest, double latest) {
    int answered_408 = 0, too_early = 0, too_late = 0;
    double slowest = 0, fastest = 1e9;
    std::string first_bad;
    for (size_t i = 0; i < conns_.size(); ++i) {
      RawConn& c = *conns_[i];
      auto r = c.TakeResponse();
      const bool ok = r && r->status == 408 && IsErrorEnvelope(*r, "request_timeout") &&
                      Lower(r->Header("Connection")) == "close" && c.buffered().empty();
      if (ok) {
        ++answered_408;
      } else if (first_bad.empty()) {
        first_bad = r ? r->Describe() : "no response: '" + c.buffered() + "'";
      }
      const double t = closed_after_[i];
      if (t < 0) continue;
      slowest = std::max(slowest, t);
      fastest = std::min(fastest, t);
      if (t < earliest) ++too_early;
      if (t >= latest) ++too_late;
    }
    INFO("first bad answer: " << first_bad);
    INFO("closed after " << fastest << " .. " << slowest << " s");
    CHECK(answered_408 == int(conns_.size()));
    CHECK(too_early == 0);
    CHECK(too_late == 0);
  }

 private:
  std::vector<std::unique_ptr<RawConn>> conns_;
  std::vector<SteadyTime::time_point> first_byte_;
  std::vector<double> closed_after_;  // -1: not closed yet
};

}  // namespace

TEST_CASE("http front end: slowloris clients get 408 at the head deadline while others are served",
          "[http][integration]") {
  constexpr int kSlow = 300;
  RaiseFdLimit(kSlow + 256);
  TempDir dir("gleaner-http");
  auto coord = StartCoordinator(dir, FastArgs());
  const int port = coord->port();
  SlowHeads slow(port, kSlow);

  // Meanwhile a normal client asks for /healthz again and again, each on a new connection.
  std::atomic<bool> stop_probing{false};
  std::vector<std::pair<int, double>> probes;  // status, seconds; read after join
  std::thread prober([&] {
    while (!stop_probing) {
      const auto t0 = SteadyTime::now();
      RawConn c(port);
      std::optional<HttpResult> r;
      if (c.connected() && c.Send(kHealthz)) r = c.ReadResponse(Millis(3000));
      probes.emplace_back(r ? r->status : 0, SecondsSince(t0));
      std::this_thread::sleep_for(Millis(100));  // pacing, not waiting for a result
    }
  });
  const bool all_closed = slow.DribbleUntilClosed(Millis(8000));
  stop_probing = true;
  prober.join();

  CHECK(all_closed);
  // The deadline is 1 s after the first byte: not sooner, and not much later.
  slow.Check(0.8, 3.0);
  double worst_probe = 0;
  int probes_ok = 0;
  for (const auto& [status, seconds] : probes) {
    if (status == 200) ++probes_ok;
    worst_probe = std::max(worst_probe, seconds);
  }
  INFO(probes.size() << " probes, slowest " << worst_probe << " s");
  CHECK(probes.size() >= 3);
  CHECK(probes_ok == int(probes.size()));
  CHECK(worst_probe < 1.0);
  CHECK(ServesHealthz(port));
}

TEST_CASE("http front end over TLS: slow heads get 408, a stalled handshake is closed, pipelining",
          "[http][tls][integration]") {
  TempDir dir("gleaner-http-tls");
  TestCa ca;
  REQUIRE(ca.error().empty());
  REQUIRE(ca.WriteCert(dir.File("ca.pem")));
  std::string error;
  const bool issued = ca.Issue(CertSpec(), dir.File("server.pem"), dir.File("server.key"), &error);
  INFO(error);
  REQUIRE(issued);
  CoordinatorOptions o;
  o.tls = {dir.File("server.pem"), dir.File("server.key"), dir.File("ca.pem")};
  // A long I/O timeout: a 408 after 1 s can only come from the head deadline.
  o.extra_args = FastArgs({"--io-timeout", "5"});
  CoordinatorProcess coord(dir.path(), o);
  const bool started = coord.Start(&error);
  INFO(error);
  REQUIRE(started);
  std::unique_ptr<SSL_CTX, void (*)(SSL_CTX*)> tls(NewTlsClientContext(dir.File("ca.pem")),
                                                   SSL_CTX_free);
  REQUIRE(tls);
  const int port = coord.port();

  // A handshake that stalls after the start of a ClientHello is closed at the idle timeout.
  RawConn stalled(port);
  REQUIRE(stalled.connected());
  REQUIRE(stalled.Send(std::string("\x16\x03\x01\x02\x00\x01\x00\x01\xfc", 9)));
  const auto stalled_since = SteadyTime::now();

  SlowHeads slow(port, 20, tls.get());
  // Pipelined requests in one TLS write, answered in order meanwhile.
  RawConn fast(port, tls.get());
  REQUIRE(fast.connected());
  REQUIRE(
      fast.Send(std::string(kHealthz) + "GET /v1/jobs HTTP/1.1\r\nHost: test\r\n\r\n" + kHealthz));
  auto first = fast.ReadResponse();
  auto second = fast.ReadResponse();
  auto third = fast.ReadResponse();
  REQUIRE(first);
  REQUIRE(second);
  REQUIRE(third);
  CHECK(first->status == 200);
  CHECK(second->status == 401);
  CHECK(third->status == 200);

  CHECK(slow.DribbleUntilClosed(Millis(6000)));
  slow.Check(0.8, 3.0);
  REQUIRE(stalled.WaitEof(Millis(3000)));
  CHECK(SecondsSince(stalled_since) >= 0.8);
  CHECK(SecondsSince(stalled_since) < 2.5);
  CHECK(stalled.buffered().empty());
}

TEST_CASE("http front end: idle connections are closed after the keep-alive timeout",
          "[http][integration]") {
  TempDir dir("gleaner-http");
  auto coord = StartCoordinator(dir, FastArgs());
  // One that never sends a byte, one idle after a response.
  RawConn silent(coord->port());
  const auto silent_since = SteadyTime::now();
  RawConn used(coord->port());
  REQUIRE(silent.connected());
  REQUIRE(used.connected());
  REQUIRE(used.Send(kHealthz));
  auto r = used.ReadResponse();
  REQUIRE(r);
  CHECK(r->status == 200);
  CHECK(r->Header("Connection").empty());  // HTTP/1.1: stays open
  const auto idle_since = SteadyTime::now();

  REQUIRE(used.WaitEof(Millis(3000)));
  const double used_idle = SecondsSince(idle_since);
  REQUIRE(silent.WaitEof(Millis(3000)));
  const double silent_idle = SecondsSince(silent_since);
  CHECK(used.buffered().empty());
  CHECK(silent.buffered().empty());
  CHECK(used_idle >= 0.8);
  CHECK(used_idle < 2.5);
  CHECK(silent_idle >= 0.8);
  CHECK(silent_idle < 2.5);
}

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

TEST_CASE("http front end: connections over --max-connections are closed at once",
          "[http][integration]") {
  TempDir dir("gleaner-http");
  auto coord =
      StartCoordinator(dir, FastArgs({"--max-connections", "8", "--keep-alive-timeout", "30"}));
  const int port = coord->port();
  // Eight connections, each known to the server (it answered them), now idle.
  std::vector<std::unique_ptr<RawConn>> held;
  for (int i = 0; i < 8; ++i) {
    held.push_back(std::make_unique<RawConn>(port));
    REQUIRE(held.back()->connected());
    REQUIRE(held.back()->Send(kHealthz));
    auto r = held.back()->ReadResponse();
    REQUIRE(r);
    REQUIRE(r->status == 200);
  }
  // A ninth is accepted and closed without an answer, at once.
  RawConn ninth(port);
  REQUIRE(ninth.connected());
  const auto t0 = SteadyTime::now();
  CHECK(ninth.WaitEof(Millis(1500)));
  CHECK(SecondsSince(t0) < 1.0);
  CHECK(ninth.buffered().empty());
  // The eight still work; when one goes, a new connection is served.
  REQUIRE(held[1]->Send(kHealthz));
  auto again = held[1]->ReadResponse();
  REQUIRE(again);
  CHECK(again->status == 200);
  held[0]->Close();
  CHECK(WaitUntil([&] { return ServesHealthz(port); }, Millis(3000), Millis(20)));
}

TEST_CASE("http front end: SIGTERM answers the request in flight, closes idle ones and exits 0",
          "[http][integration]") {
  TempDir dir("gleaner-http");
  // A long keep-alive timeout: the idle connection can only be closed by the drain.
  auto coord = StartCoordinator(dir, FastArgs({"--keep-alive-timeout", "30"}));
  const int port = coord->port();
  std::string error;
  auto token = CreateKey(*coord, "developer", &error);
  INFO(error);
  REQUIRE(token);

  RawConn idle(port), busy(port);
  REQUIRE(idle.connected());
  REQUIRE(busy.connected());
  for (RawConn* c : {&idle, &busy}) {
    REQUIRE(c->Send(kHealthz));
    auto r = c->ReadResponse();
    REQUIRE(r);
    REQUIRE(r->status == 200);
  }
  // The busy connection's second request is in flight: its head is in, its body is not.
  const std::string body = R"({"kind":"synthetic","params":{"steps":10}})";
  REQUIRE(busy.Send(
      PostHead("/v1/jobs", *token,
               "Content-Length: " + std::to_string(body.size()) + "\r\nExpect: 100-continue\r\n")));
  auto interim = busy.ReadResponse();
  REQUIRE(interim);
  REQUIRE(interim->status == 100);

  coord->process().Signal(SIGTERM);
  const auto t0 = SteadyTime::now();
  CHECK(idle.WaitEof(Millis(3000)));
  CHECK(idle.buffered().empty());
  CHECK(SecondsSince(t0) < 2.0);
  // No new connections while draining.
  RawConn late(port);
  CHECK((!late.connected() || late.WaitEof(Millis(2000))));
  CHECK(coord->process().Running());

  REQUIRE(busy.Send(body));
  auto r = busy.ReadResponse();
  REQUIRE(r);
  INFO(r->Describe());
  CHECK(r->status == 201);
  CHECK(Lower(r->Header("Connection")) == "close");
  CHECK(busy.WaitEof(Millis(3000)));
  auto exit = coord->process().Wait(Millis(5000));
  REQUIRE(exit);
  CHECK(exit->clean());
  CHECK(SecondsSince(t0) < 5.0);
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

TEST_CASE("http front end: a blob upload in progress at SIGTERM is answered with Connection close",
          "[http][integration]") {
  TempDir dir("gleaner-http");
  // A long keep-alive timeout: the idle connection can only be closed by the drain.
  auto coord = StartCoordinator(dir, FastArgs({"--keep-alive-timeout", "30"}));
  std::string error;
  auto token = CreateKey(*coord, "developer", &error);
  INFO(error);
  REQUIRE(token);
  const std::string data(50000, 'z');
  HttpResult up = coord->Client(*token).Post(
      "/v1/uploads",
      {{"name", "d.bin"}, {"size", int64_t(data.size())}, {"sha256", Sha256Hex(data)}});
  INFO(up.Describe());
  REQUIRE(up.status / 100 == 2);
  const std::string target = up.json()["url"].get<std::string>().substr(coord->url().size());

  RawConn idle(coord->port()), upload(coord->port());
  REQUIRE(idle.connected());
  REQUIRE(upload.connected());
  REQUIRE(idle.Send(kHealthz));
  REQUIRE(idle.ReadResponse());
  // The upload is in progress on a blob worker once the 100 Continue came.
  REQUIRE(upload.Send("PUT " + target + " HTTP/1.1\r\nHost: test\r\nContent-Length: " +
                      std::to_string(data.size()) + "\r\nExpect: 100-continue\r\n\r\n"));
  auto interim = upload.ReadResponse();
  REQUIRE(interim);
  REQUIRE(interim->status == 100);

  coord->process().Signal(SIGTERM);
  REQUIRE(idle.WaitEof(Millis(3000)));  // the drain has begun
  REQUIRE(upload.Send(data));
  auto r = upload.ReadResponse();
  REQUIRE(r);
  INFO(r->Describe());
  CHECK(r->status / 100 == 2);
  CHECK(Lower(r->Header("Connection")) == "close");
  CHECK(upload.WaitEof(Millis(3000)));
  auto exit = coord->process().Wait(Millis(5000));
  REQUIRE(exit);
  CHECK(exit->clean());
}
