// Black-box tests of gleaner-coordinator as a process: startup, flags, signals, bootstrap,
// error envelopes over real HTTP.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>

#include "tests/integration/coordinator_fixture.h"
#include "tests/integration/harness.h"

using namespace gleaner;
using namespace gleaner::testing;

namespace {

// Runs gleaner-coordinator with args to completion; returns (exit status, stderr).
std::pair<ExitStatus, std::string> RunToExit(
    const TempDir& dir, std::vector<std::string> args,
    std::vector<std::pair<std::string, std::string>> env = {}) {
  ProcessSpec spec;
  spec.binary = "gleaner-coordinator";
  spec.args = std::move(args);
  spec.env = std::move(env);
  spec.unset_env = {"GLEANER_CONFIG", "GLEANER_OPERATOR_TOKEN", "GLEANER_SIGNING_KEY"};
  spec.stderr_path = dir.File("run.stderr");
  RemoveAll(spec.stderr_path);
  Process p(spec);
  std::string error;
  REQUIRE(p.Start(&error));
  auto st = p.Wait(Millis(10000));
  REQUIRE(st.has_value());
  return {*st, p.Stderr()};
}

void CheckEnvelope(const HttpResult& r, int status, const std::string& code) {
  INFO(r.Describe());
  CHECK(r.status == status);
  Json j = r.json();
  REQUIRE(j.is_object());
  REQUIRE(j.contains("error"));
  CHECK(j["error"]["code"] == code);
  CHECK(j["error"]["message"].is_string());
}

}  // namespace

TEST_CASE("coordinator starts fast, answers /healthz and stops cleanly on SIGTERM",
          "[coordinator]") {
  TempDir dir;
  CoordinatorProcess coord(dir.path());
  auto t0 = std::chrono::steady_clock::now();
  std::string error;
  REQUIRE(coord.Start(&error));
  auto startup = std::chrono::steady_clock::now() - t0;
  CHECK(startup < std::chrono::seconds(1));

  HttpClient client = coord.Client();
  HttpResult r = client.Get("/healthz");
  INFO(r.Describe());
  CHECK(r.status == 200);
  CHECK(!r.Header("X-Request-Id").empty());

  // Files the shell owns: a durable signing key with mode 0600, the blob root.
  struct stat st;
  REQUIRE(::stat(dir.File("data/signing.key").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  CHECK(ReadFile(dir.File("data/signing.key")).size() >= 32);

  coord.process().Signal(SIGTERM);
  auto exit = coord.process().Wait(Millis(10000));
  REQUIRE(exit.has_value());
  CHECK(exit->clean());
  std::string log = coord.process().Stderr();
  CHECK(log.find("\"msg\":\"listening\"") != std::string::npos);
  CHECK(log.find("\"msg\":\"stopped\"") != std::string::npos);
  // Every stderr line is one JSON object with ts, level and msg.
  size_t pos = 0;
  int lines = 0;
  while (pos < log.size()) {
    size_t nl = log.find('\n', pos);
    std::string line = log.substr(pos, nl - pos);
    pos = nl == std::string::npos ? log.size() : nl + 1;
    if (line.empty()) continue;
    auto j = ParseJson(line);
    INFO(line);
    REQUIRE(j.ok());
    CHECK(j->contains("ts"));
    CHECK(j->contains("level"));
    CHECK(j->contains("msg"));
    ++lines;
  }
  CHECK(lines >= 3);
  // The request line carries the request fields.
  CHECK(log.find("\"path\":\"/healthz\"") != std::string::npos);
  CHECK(log.find("\"latency_ms\"") != std::string::npos);
}

TEST_CASE("a SIGTERM lets an in-flight request finish", "[coordinator]") {
  TempDir dir;
  CoordinatorProcess coord(dir.path());
  std::string error;
  REQUIRE(coord.Start(&error));
  // A request whose body is only half sent when the signal arrives.
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(uint16_t(coord.port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  timeval tv{10, 0};  // never hang the test on a silent server
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string body = "{\"kind\":\"synthetic\"}";
  // Expect: 100-continue makes the server answer "100 Continue" once a worker has parsed the
  // headers: from then on the request is in flight, deterministically.
  std::string head =
      "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Expect: 100-continue\r\nConnection: close\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n\r\n";
  REQUIRE(::send(fd, head.data(), head.size(), MSG_NOSIGNAL) == ssize_t(head.size()));
  std::string cont;
  char buf[4096];
  while (cont.find("\r\n\r\n") == std::string::npos) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    REQUIRE(n > 0);
    cont.append(buf, size_t(n));
  }
  REQUIRE(cont.rfind("HTTP/1.1 100", 0) == 0);
  coord.process().Signal(SIGTERM);
  REQUIRE(
      WaitUntil([&] { return coord.process().Stderr().find("shutting down") != std::string::npos; },
                Millis(5000)));
  CHECK(coord.process().Running());
  REQUIRE(::send(fd, body.data(), body.size(), MSG_NOSIGNAL) == ssize_t(body.size()));
  std::string response;
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) break;
    response.append(buf, size_t(n));
  }
  ::close(fd);
  INFO(response);
  CHECK(response.rfind("HTTP/1.1 ", 0) == 0);
  CHECK((response.find("\"error\"") != std::string::npos ||
         response.find("\"id\"") != std::string::npos));
  auto exit = coord.process().Wait(Millis(10000));
  REQUIRE(exit.has_value());
  CHECK(exit->clean());
  // Nothing listens any more.
  HttpClient after = coord.Client();
  after.set_timeout(Millis(500));
  CHECK(after.Get("/healthz").status == 0);
}

TEST_CASE("bad flags and bad configuration exit non-zero with one readable line", "[coordinator]") {
  TempDir dir;
  const std::string db = dir.File("db.sqlite"), data = dir.File("data");
  struct Case {
    std::vector<std::string> args;
    std::vector<std::pair<std::string, std::string>> env;
    std::string expect;
  };
  std::vector<Case> cases = {
      {{"serve", "--data-dir", data}, {}, "--db is required"},
      {{"serve", "--db", db, "--data-dir", data, "--bogus", "1"}, {}, "unknown flag --bogus"},
      {{"serve", "--db", db, "--data-dir", data, "--heartbeat-interval", "abc"},
       {},
       "--heartbeat-interval"},
      {{"serve", "--db", db, "--data-dir", data, "--heartbeat-interval", "0"},
       {},
       "--heartbeat-interval: must be in [0.001, 3600]"},
      {{"serve", "--db", db, "--data-dir", data, "--listen", "nope"}, {}, "--listen"},
      {{"serve", "--db", db, "--data-dir", data, "--min-nodes", "5", "--max-nodes", "2"},
       {},
       "autoscaler"},
      {{"serve", "--db", db, "--data-dir", data},
       {{"GLEANER_STALL_AFTER", "x"}},
       "GLEANER_STALL_AFTER"},
      {{"serve", "--db", db, "--data-dir", data, "--s3-endpoint", "http://127.0.0.1:1"}, {}, "S3"},
      {{"serve", "--db", db, "--data-dir", data, "--config", dir.File("missing.conf")},
       {},
       "config file"},
      {{"frobnicate"}, {}, "unknown command"},
      {{"serve", "--db", db, "--data-dir", data, "--listen", "127.0.0.1:0", "--port-file",
        dir.File("no/such/dir/port")},
       {},
       "cannot write port file"},
      {{"serve", "--db", db, "--data-dir", data},
       {{"GLEANER_OPERATOR_TOKEN", "short"}},
       "GLEANER_OPERATOR_TOKEN"},
      {{"serve", "--db", "/proc/no/such/dir/db.sqlite", "--data-dir", data, "--listen",
        "127.0.0.1:0"},
       {},
       ""},
  };
  for (const Case& c : cases) {
    auto [st, err] = RunToExit(dir, c.args, c.env);
    INFO(err);
    CHECK(st.exited);
    CHECK(st.code != 0);
    // One line.
    CHECK(!err.empty());
    CHECK(err.find('\n') == err.size() - 1);
    if (!c.expect.empty()) CHECK(err.find(c.expect) != std::string::npos);
  }
}

TEST_CASE("config file and environment feed settings, flags win", "[coordinator]") {
  TempDir dir;
  REQUIRE(WriteFile(dir.File("c.conf"),
                    "# test config\nheartbeat-interval = 7\nmaintenance-period=0.5\n"
                    "listen = 127.0.0.1:0\n"));
  CoordinatorOptions o;
  o.extra_args = {"--config", dir.File("c.conf"), "--heartbeat-interval", "3"};
  o.env = {{"GLEANER_STALL_AFTER", "11"}};
  CoordinatorProcess coord(dir.path(), o);
  std::string error;
  REQUIRE(coord.Start(&error));
  std::string log = coord.process().Stderr();
  INFO(log);
  CHECK(log.find("\"heartbeat_interval_s\":3.0") != std::string::npos);
  CHECK(log.find("\"stall_after_s\":11.0") != std::string::npos);
}

TEST_CASE("operator token bootstrap is idempotent across restarts", "[coordinator]") {
  TempDir dir;
  CoordinatorProcess coord(dir.path());
  std::string error;
  REQUIRE(coord.Start(&error));
  REQUIRE(coord.Restart(&error));
  CHECK(coord.process().Stderr().find("operator bootstrap failed") == std::string::npos);
  // The signing key survives a restart.
  std::string key = ReadFile(dir.File("data/signing.key"));
  REQUIRE(coord.Restart(&error));
  CHECK(ReadFile(dir.File("data/signing.key")) == key);
  HttpClient client = coord.Client();
  CHECK(client.Get("/healthz").status == 200);
}

TEST_CASE("errors over real HTTP carry the error envelope", "[coordinator]") {
  TempDir dir;
  CoordinatorOptions o;
  o.extra_args = {"--max-body", "4096"};
  CoordinatorProcess coord(dir.path(), o);
  std::string error;
  REQUIRE(coord.Start(&error));
  HttpClient client = coord.Client();

  CheckEnvelope(client.Get("/no/such/route"), 404, "not_found");
  // A JSON body over --max-body is refused while streaming, before the core sees it.
  CheckEnvelope(client.Request("POST", "/v1/jobs", std::string(5000, 'x'), "application/json"), 413,
                "too_large");
  // Blob URLs without a valid signature are refused.
  HttpClient blobs = coord.Client();
  HttpResult put =
      blobs.Request("PUT", "/blobs/jobs/x/y?exp=1&sig=00", "data", "application/octet-stream");
  INFO(put.Describe());
  CHECK((put.status == 403 || put.status == 401));
  CHECK(put.json().contains("error"));
  HttpResult get = blobs.Get("/blobs/../../etc/passwd");
  CHECK(get.status >= 400);
  CHECK(get.json().contains("error"));
  // The server is still fine afterwards.
  CHECK(coord.Client().Get("/healthz").status == 200);
}

TEST_CASE("two coordinators start on one database at once", "[coordinator]") {
  TempDir dir;
  CoordinatorOptions a, b;
  a.name = "a";
  b.name = "b";
  CoordinatorProcess ca(dir.path(), a), cb(dir.path(), b);
  std::string ea, eb;
  // Start both before waiting on either, so migrations and key creation race.
  REQUIRE(ca.process().Start(&ea));
  REQUIRE(cb.process().Start(&eb));
  auto pa = WaitForPortFile(dir.File("a.port"), &ca.process(), Millis(10000));
  auto pb = WaitForPortFile(dir.File("b.port"), &cb.process(), Millis(10000));
  INFO(ca.process().Stderr() << cb.process().Stderr());
  REQUIRE(pa);
  REQUIRE(pb);
  CHECK(HttpClient("127.0.0.1", *pa).Get("/healthz").status == 200);
  CHECK(HttpClient("127.0.0.1", *pb).Get("/healthz").status == 200);
}

TEST_CASE("keep-alive responses are not held back by delayed ACKs", "[coordinator]") {
  // Without TCP_NODELAY on the listening socket every response after the first on a connection
  // waits ~40 ms for the client's delayed ACK.
  TempDir dir;
  CoordinatorProcess coord(dir.path());
  std::string error;
  REQUIRE(coord.Start(&error));
  HttpClient client = coord.Client();
  REQUIRE(client.Get("/healthz").status == 200);
  std::vector<double> ms;
  for (int i = 0; i < 21; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    REQUIRE(client.Get("/healthz").status == 200);
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  INFO("median " << ms[10] << " ms");
  CHECK(ms[10] < 20);
}

TEST_CASE("S3 settings reach the core: upload URLs are presigned for the bucket",
          "[coordinator][s3]") {
  TempDir dir;
  for (bool virtual_hosted : {false, true}) {
    CoordinatorOptions o;
    o.name = virtual_hosted ? "vh" : "path";
    o.extra_args = {"--s3-endpoint",  "http://s3.test:9000", "--s3-bucket",
                    "gleaner-bucket", "--s3-region",         "eu-west-1"};
    if (virtual_hosted) o.extra_args.push_back("--s3-virtual-hosted");
    o.env = {{"AWS_ACCESS_KEY_ID", "AKIDTEST"}, {"AWS_SECRET_ACCESS_KEY", "secret-test"}};
    CoordinatorProcess coord(dir.path(), o);
    std::string error;
    REQUIRE(coord.Start(&error));
    auto dev = CreateKey(coord, "developer", &error);
    REQUIRE(dev);
    HttpResult r = coord.Client(*dev).Post(
        "/v1/uploads", {{"name", "d.bin"}, {"size", 3}, {"sha256", std::string(64, 'a')}});
    INFO(r.Describe());
    REQUIRE(r.status / 100 == 2);
    std::string url = r.json()["url"].get<std::string>();
    INFO(url);
    if (virtual_hosted) {
      CHECK(url.rfind("http://gleaner-bucket.s3.test:9000/", 0) == 0);
    } else {
      CHECK(url.rfind("http://s3.test:9000/gleaner-bucket/", 0) == 0);
    }
    CHECK(url.find("X-Amz-Signature=") != std::string::npos);
    CHECK(url.find("AKIDTEST") != std::string::npos);
    CHECK(url.find("eu-west-1") != std::string::npos);
    CHECK(url.find("secret-test") == std::string::npos);
  }
}
