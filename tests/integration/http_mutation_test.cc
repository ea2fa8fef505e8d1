// The real server under malformed bytes: the HTTP parser's fuzz seeds
// (tests/fuzz/corpus/http_request), mutated with a fixed seed, sent raw in random pieces, half of
// them followed by the client's FIN. Every connection must end with an HTTP answer or a close
// within the deadlines (never a hang), and the server must keep serving. libFuzzer covers the
// parser alone; this covers the loop around it (buffering, pipelining, bodies, lingering close).
#include <dirent.h>
#include <sys/socket.h>

#include <catch2/catch.hpp>
#include <random>
#include <string>
#include <vector>

#include "tests/integration/http_frontend_util.h"

using namespace gleaner;
using namespace gleaner::testing;

namespace {

std::vector<std::string> Seeds() {
  std::vector<std::string> seeds;
  const std::string dir = std::string(GLEANER_SOURCE_DIR) + "/tests/fuzz/corpus/http_request";
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      if (e->d_name[0] == '.') continue;
      seeds.push_back(ReadFile(dir + "/" + e->d_name));
    }
    ::closedir(d);
  }
  return seeds;
}

std::string Mutate(const std::vector<std::string>& seeds, std::mt19937& rng) {
  auto pick = [&](size_t n) { return size_t(rng() % (n == 0 ? 1 : n)); };
  std::string b = seeds[pick(seeds.size())];
  static const std::string kBytes = "\r\n :;,-0123456789abcdefGETPOSTHTTP/1.";
  for (int i = 0, n = 1 + int(rng() % 8); i < n; ++i) {
    switch (rng() % 5) {
      case 0:
        if (!b.empty()) b[pick(b.size())] = char(rng() % 256);
        break;
      case 1:
        if (!b.empty()) b.erase(pick(b.size()), 1);
        break;
      case 2:
        b.insert(pick(b.size() + 1), 1, kBytes[pick(kBytes.size())]);
        break;
      case 3:
        b += seeds[pick(seeds.size())];
        break;
      default:
        if (!b.empty()) {
          size_t at = pick(b.size());
          std::string run = b.substr(at, 1 + pick(40));
          for (int k = 0, reps = 2 + int(rng() % 10); k < reps; ++k) b.insert(at, run);
        }
    }
  }
  return b;
}

}  // namespace

TEST_CASE("http front end: mutated parser seeds sent raw are answered or closed, never hang",
          "[http][integration]") {
  const std::vector<std::string> seeds = Seeds();
  REQUIRE(seeds.size() >= 10);
  TempDir dir("gleaner-http");
  // A short keep-alive timeout: a mutated input that is still a good request keeps its
  // connection open, and the test waits for the close.
  auto coord = StartCoordinator(dir, FastArgs({"--keep-alive-timeout", "0.2"}));
  std::mt19937 rng(20261121);
  constexpr int kInputs = 400;
  int answered = 0, closed = 0;
  for (int i = 0; i < kInputs; ++i) {
    const std::string input = Mutate(seeds, rng);
    RawConn conn(coord->port());
    REQUIRE(conn.connected());
    for (size_t at = 0; at < input.size();) {
      size_t n = 1 + rng() % (input.size() - at);
      if (!conn.Send(input.substr(at, n))) break;  // the server may close early: fine
      at += n;
    }
    if (rng() % 2 == 0) ::shutdown(conn.fd(), SHUT_WR);
    // The deadlines are at most 1 s: every connection ends well within 5 s.
    INFO("input " << i << ": " << input.substr(0, 200));
    REQUIRE(conn.WaitEof(Millis(5000)));
    (conn.buffered().rfind("HTTP/1.1 ", 0) == 0 ? answered : closed)++;
  }
  // A partial head followed by the client's FIN is closed without an answer; the rest answered.
  CHECK(answered > kInputs / 2);
  UNSCOPED_INFO("answered " << answered << ", closed without answer " << closed);
  HttpResult health = coord->Client().Get("/healthz");
  CHECK(health.status == 200);
  CHECK(coord->process().Stop().clean());
}
