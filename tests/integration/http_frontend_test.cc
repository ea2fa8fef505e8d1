// The coordinator's HTTP/1.1 front end through raw sockets, connections' lifecycle: slow clients
// are bounded by the head deadline (408) while others are served, also over TLS; idle and
// stalled connections time out; the connection limit; draining on SIGTERM (API and blob
// requests in progress are answered with Connection: close, idle connections closed).
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "shared/sha256.h"
#include "tests/integration/http_frontend_util.h"
#include "tests/integration/test_pki.h"

using namespace gleaner;
using namespace gleaner::testing;

namespace {

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

TEST_CASE("http front end: a client that half-closes after its request is answered and closed",
          "[http][integration]") {
  TempDir dir("gleaner-http");
  // A long keep-alive timeout: only reading the client's EOF can close the connection soon.
  auto coord = StartCoordinator(dir, {"--keep-alive-timeout", "30"});
  RawConn conn(coord->port());
  REQUIRE(conn.connected());
  REQUIRE(conn.Send(kHealthz));
  REQUIRE(::shutdown(conn.fd(), SHUT_WR) == 0);  // request, then FIN in the same burst
  const auto sent = SteadyTime::now();
  auto r = conn.ReadResponse();
  REQUIRE(r);
  CHECK(r->status == 200);
  REQUIRE(conn.WaitEof(Millis(5000)));
  CHECK(SecondsSince(sent) < 2.0);
}
