// The harness itself: processes, environment, output capture, signals, port files, waiting.
#include "tests/integration/harness.h"

#include <signal.h>

#include <catch2/catch.hpp>

using namespace gleaner::testing;

TEST_CASE("harness: a child gets args, env and cwd, output and exit code come back", "[harness]") {
  TempDir dir;
  REQUIRE(!dir.path().empty());
  ProcessSpec spec;
  spec.binary = "/bin/sh";
  spec.args = {"-c", "echo \"$GREETING $1\"; pwd; echo oops >&2; exit 3", "sh", "world"};
  spec.env = {{"GREETING", "hello"}};
  spec.cwd = dir.path();
  spec.stdout_path = dir.File("out");
  spec.stderr_path = dir.File("err");
  Process p(spec);
  std::string error;
  REQUIRE(p.Start(&error));
  auto st = p.Wait(Millis(5000));
  REQUIRE(st);
  CHECK(st->exited);
  CHECK(st->code == 3);
  CHECK(p.Stdout() == "hello world\n" + dir.path() + "\n");
  CHECK(p.Stderr() == "oops\n");
}

TEST_CASE("harness: a missing binary fails Start with a reason", "[harness]") {
  Process p(ProcessSpec{"/no/such/binary", {}, {}, {}, "", "", ""});
  std::string error;
  CHECK_FALSE(p.Start(&error));
  CHECK(error.find("/no/such/binary") != std::string::npos);
}

TEST_CASE("harness: signals reach the whole process group, Stop escalates to SIGKILL",
          "[harness]") {
  TempDir dir;
  // A shell that ignores SIGTERM and has a child of its own.
  ProcessSpec spec;
  spec.binary = "/bin/sh";
  spec.args = {"-c", "trap '' TERM; sleep 30 & echo started > " + dir.File("flag") + "; wait"};
  Process p(spec);
  std::string error;
  REQUIRE(p.Start(&error));
  REQUIRE(WaitUntil([&] { return ReadFile(dir.File("flag")) == "started\n"; }, Millis(5000)));
  CHECK(p.Running());
  auto t0 = std::chrono::steady_clock::now();
  ExitStatus st = p.Stop(Millis(200));
  CHECK(st.signaled);
  CHECK(st.signal == SIGKILL);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(3));
  CHECK_FALSE(p.Running());
}

TEST_CASE("harness: port files are read when complete, a dead child ends the wait early",
          "[harness]") {
  TempDir dir;
  ProcessSpec spec;
  spec.binary = "/bin/sh";
  spec.args = {"-c", "printf 12 > " + dir.File("p") + "; sleep 0.05; printf '345\\n' >> " +
                         dir.File("p") + "; sleep 30"};
  Process p(spec);
  std::string error;
  REQUIRE(p.Start(&error));
  auto port = WaitForPortFile(dir.File("p"), &p, Millis(5000));
  REQUIRE(port);
  CHECK(*port == 12345);
  p.Kill();

  ProcessSpec dies;
  dies.binary = "/bin/sh";
  dies.args = {"-c", "exit 1"};
  Process q(dies);
  REQUIRE(q.Start(&error));
  auto t0 = std::chrono::steady_clock::now();
  CHECK_FALSE(WaitForPortFile(dir.File("never"), &q, Millis(10000)));
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
}

TEST_CASE("harness: HttpClient reports a refused connection without throwing", "[harness]") {
  HttpClient c("127.0.0.1", 1);
  c.set_timeout(Millis(500));
  HttpResult r = c.Get("/");
  CHECK(r.status == 0);
  CHECK_FALSE(r.error.empty());
  CHECK(HttpClient::Fetch("GET", "not a url").status == 0);
}
