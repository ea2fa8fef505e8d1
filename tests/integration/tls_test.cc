// TLS end to end: gleaner-coordinator serving HTTPS with a throwaway CA, gleaner-agent verifying
// it, bad certificates refused without a retry storm, SIGHUP rotation, the protocol policy and
// the plain-HTTP-on-loopback-only rule.
#include <openssl/ssl.h>
#include <signal.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

#include "tests/integration/agent_fleet.h"
#include "tests/integration/test_pki.h"

using namespace gleaner;
using namespace gleaner::testing;

namespace {

std::string Tail(const std::string& s) {
  return s.size() < 3000 ? s : s.substr(s.size() - 3000);
}

size_t Count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t p = text.find(needle); p != std::string::npos; p = text.find(needle, p + 1)) ++n;
  return n;
}

// Issues a certificate from `ca` into cert/key files (the test fails with the reason otherwise).
void Issue(const TestCa& ca, const CertSpec& spec, const std::string& cert,
           const std::string& key) {
  std::string error;
  bool ok = ca.Issue(spec, cert, key, &error);
  INFO(error);
  REQUIRE(ok);
}

// A CA (written to <dir>/ca.pem) and a server certificate for 127.0.0.1 with `serial`
// (<dir>/server.pem, <dir>/server.key).
CoordinatorTls MakeTls(const TempDir& dir, const TestCa& ca, long serial) {
  REQUIRE(ca.error().empty());
  REQUIRE(ca.WriteCert(dir.File("ca.pem")));
  CertSpec spec;
  spec.serial = serial;
  Issue(ca, spec, dir.File("server.pem"), dir.File("server.key"));
  return {dir.File("server.pem"), dir.File("server.key"), dir.File("ca.pem")};
}

Json Params(int64_t seed, int64_t steps, int64_t step_ms, int64_t every) {
  return {{"seed", seed}, {"steps", steps}, {"step_ms", step_ms}, {"checkpoint_every", every}};
}

}  // namespace

TEST_CASE("HTTPS: an agent with --ca-file completes jobs while the certificate is rotated",
          "[tls][e2e]") {
  TempDir dir("gleaner-tls-e2e");
  TestCa ca;
  CoordinatorTls tls = MakeTls(dir, ca, 10);
  Fleet fleet(dir.path(), 0.2, {}, {}, tls);
  INFO(fleet.error());
  REQUIRE(fleet.ok());
  CoordinatorProcess& coord = fleet.coordinator();
  CHECK(coord.url().rfind("https://127.0.0.1:", 0) == 0);
  CHECK(ProbeTls(coord.port(), {0, "", tls.ca_file}).serial == "0A");
  CHECK(coord.process().Stderr().find("\"public_url\":\"https://127.0.0.1:") !=
        std::string::npos);  // blob URLs are https:// too
  // Plain HTTP to the HTTPS port gets no answer.
  CHECK(HttpClient("http://127.0.0.1:" + std::to_string(coord.port())).Get("/healthz").status == 0);

  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(fleet.Submit(Params(300 + i, 60, 15, 5)));
  for (const std::string& id : ids) REQUIRE(!id.empty());
  AgentProcess& agent = fleet.AddAgent("a");
  std::string error;
  REQUIRE(agent.Start(&error));
  REQUIRE(WaitUntil([&] { return !agent.NodeId().empty(); }, Millis(10000)));

  // Mid-run: a new certificate from the same CA, then SIGHUP.
  REQUIRE(WaitUntil([&] { return !fleet.RunningJobOf(agent.NodeId(), 10, 50).empty(); },
                    Millis(15000), Millis(10)));
  CertSpec next;
  next.serial = 11;
  Issue(ca, next, tls.cert, tls.key);
  coord.process().Signal(SIGHUP);
  REQUIRE(WaitUntil(
      [&] {
        return coord.process().Stderr().find("\"msg\":\"tls reloaded\"") != std::string::npos;
      },
      Millis(5000)));
  TlsProbeResult probe = ProbeTls(coord.port(), {0, "", tls.ca_file});
  INFO(probe.error);
  CHECK(probe.ok);
  CHECK(probe.serial == "0B");

  // A broken pair (a certificate without its key) is refused; the service keeps the last good one.
  TestCa other("Other CA");
  Issue(other, CertSpec{}, tls.cert, dir.File("unused.key"));
  coord.process().Signal(SIGHUP);
  REQUIRE(WaitUntil(
      [&] { return coord.process().Stderr().find("tls reload failed") != std::string::npos; },
      Millis(5000)));
  CHECK(coord.process().Stderr().find("does not match the certificate") != std::string::npos);
  CHECK(ProbeTls(coord.port(), {0, "", tls.ca_file}).serial == "0B");
  CHECK(coord.process().Running());

  INFO(Tail(agent.Log()));
  REQUIRE(fleet.WaitAllFinal(ids, Millis(40000)));
  for (size_t i = 0; i < ids.size(); ++i) {
    Json j = fleet.Job(ids[i]);
    CHECK(j.value("state", "") == "completed");
    CHECK(j.value("failures", -1) == 0);
    CHECK(fleet.ResultChain(ids[i]) == ExpectedChain(300 + int64_t(i), 60) + "\n");
  }
  CHECK(agent.Log().find("TLS") == std::string::npos);  // no TLS trouble at any point
}

TEST_CASE("wrong CA, expired certificate and hostname mismatch: refused, clear error, no storm",
          "[tls][e2e]") {
  TempDir dir("gleaner-tls-refused");
  TestCa ca, stranger("Stranger CA");
  REQUIRE(ca.WriteCert(dir.File("ca.pem")));
  REQUIRE(stranger.WriteCert(dir.File("stranger-ca.pem")));
  std::string error;
  CertSpec good, expired, other_name;
  expired.not_before_s = -2 * 86400;
  expired.not_after_s = -86400;
  other_name.ip_addresses = {};
  other_name.dns_names = {"gleaner.example.com"};
  Issue(ca, good, dir.File("good.pem"), dir.File("good.key"));
  Issue(ca, expired, dir.File("expired.pem"), dir.File("expired.key"));
  Issue(ca, other_name, dir.File("other.pem"), dir.File("other.key"));

  struct Server {
    std::string name;
    std::unique_ptr<TempDir> dir;
    std::unique_ptr<CoordinatorProcess> coord;
  };
  std::vector<Server> servers;
  for (const char* name : {"good", "expired", "other"}) {
    Server s{name, std::make_unique<TempDir>(std::string("gleaner-tls-") + name), nullptr};
    CoordinatorOptions o;
    o.name = name;
    o.tls = {dir.File(std::string(name) + ".pem"), dir.File(std::string(name) + ".key"),
             dir.File("ca.pem")};
    s.coord = std::make_unique<CoordinatorProcess>(s.dir->path(), o);
    REQUIRE(s.coord->Start(&error));
    servers.push_back(std::move(s));
  }
  CHECK(servers[1].coord->process().Stderr().find("expired or not yet valid") != std::string::npos);
  auto enroll = CreateKey(*servers[0].coord, "enroll", &error);
  REQUIRE(enroll);

  struct Case {
    std::string name;
    int server;
    std::string ca_file;  // "" = system CAs
    std::string expect;   // in the agent's log
  };
  std::vector<Case> cases = {
      {"wrong-ca", 0, dir.File("stranger-ca.pem"), "unable to get local issuer certificate"},
      {"system-cas", 0, "", "trusting the system CAs"},
      {"expired", 1, dir.File("ca.pem"), "certificate has expired"},
      {"hostname", 2, dir.File("ca.pem"), "subject name matches target host"},
  };
  std::vector<std::unique_ptr<AgentProcess>> agents;
  auto start = std::chrono::steady_clock::now();
  for (const Case& c : cases) {
    std::vector<std::string> args;
    if (!c.ca_file.empty()) args = {"--ca-file", c.ca_file};
    agents.push_back(std::make_unique<AgentProcess>(
        dir.path(), c.name, servers[size_t(c.server)].coord->url(), *enroll,
        std::vector<std::pair<std::string, std::string>>{}, args));
    REQUIRE(agents.back()->Start(&error));
  }
  // Backoff 0.5 s doubling (with jitter in [d/2, d]): at most 4 attempts in 3 s; a storm would
  // be hundreds.
  std::this_thread::sleep_until(start + std::chrono::milliseconds(3000));
  for (size_t i = 0; i < cases.size(); ++i) {
    std::string log = agents[i]->Log();
    INFO(cases[i].name << ":\n" << Tail(log));
    size_t attempts = Count(log, "(retrying in");
    CHECK(attempts >= 2);
    CHECK(attempts <= 5);
    CHECK(log.find("TLS certificate refused") != std::string::npos);
    CHECK(log.find(cases[i].expect) != std::string::npos);
    CHECK(agents[i]->NodeId().empty());
    CHECK(agents[i]->process().Running());
  }
  // The same agent with the right CA gets in.
  AgentProcess right(dir.path(), "right", servers[0].coord->url(), *enroll, {},
                     {"--ca-file", dir.File("ca.pem")});
  REQUIRE(right.Start(&error));
  INFO(Tail(right.Log()));
  CHECK(WaitUntil([&] { return !right.NodeId().empty(); }, Millis(10000)));
}

TEST_CASE("TLS policy: 1.2 minimum and AEAD ciphers only, bad files refused at start", "[tls]") {
  TempDir dir("gleaner-tls-policy");
  TestCa ca;
  CoordinatorOptions o;
  o.tls = MakeTls(dir, ca, 7);
  CoordinatorProcess coord(dir.path(), o);
  std::string error;
  REQUIRE(coord.Start(&error));
  // The API over HTTPS with the harness client (httplib, verifying).
  HttpResult health = coord.Client().Get("/healthz");
  INFO(health.Describe() << health.error);
  CHECK(health.status == 200);
  TlsProbeResult r = ProbeTls(coord.port(), {0, "", o.tls.ca_file});
  INFO(r.error);
  CHECK(r.ok);
  CHECK(r.version == "TLSv1.3");
  // TLS 1.1 (offered by a client that allows it) is refused by the server; 1.2 is accepted.
  r = ProbeTls(coord.port(), {TLS1_1_VERSION, "", ""});
  CHECK_FALSE(r.ok);
  CHECK(r.error.find("protocol version") != std::string::npos);
  r = ProbeTls(coord.port(), {TLS1_2_VERSION, "", o.tls.ca_file});
  CHECK(r.ok);
  CHECK(r.version == "TLSv1.2");
  // TLS 1.2 with CBC or without forward secrecy: no shared cipher.
  for (const char* cipher : {"ECDHE-ECDSA-AES128-SHA", "AES128-GCM-SHA256"}) {
    INFO(cipher);
    r = ProbeTls(coord.port(), {TLS1_2_VERSION, cipher, ""});
    CHECK_FALSE(r.ok);
    CHECK(r.error.find("handshake failure") != std::string::npos);
  }
  r = ProbeTls(coord.port(), {TLS1_2_VERSION, "ECDHE-ECDSA-CHACHA20-POLY1305", ""});
  CHECK(r.ok);
  coord.process().Stop();

  // A key that does not belong to the certificate, and a missing file: exit 2, one line.
  TestCa other("Other CA");
  Issue(other, CertSpec{}, dir.File("other.pem"), dir.File("other.key"));
  struct Bad {
    std::string cert, key, expect;
  };
  for (const Bad& b : std::vector<Bad>{
           {o.tls.cert, dir.File("other.key"), "does not match the certificate"},
           {dir.File("missing.pem"), o.tls.key, "--tls-cert: cannot read"},
           {dir.File("ca.pem"), dir.File("ca.pem"), "--tls-key: no unencrypted PEM private key"}}) {
    Process p({"gleaner-coordinator",
               {"serve", "--db", dir.File("db2.sqlite"), "--data-dir", dir.File("data2"),
                "--listen", "127.0.0.1:0", "--tls-cert", b.cert, "--tls-key", b.key},
               {},
               {},
               "",
               "",
               dir.File("bad.stderr")});
    RemoveAll(dir.File("bad.stderr"));
    REQUIRE(p.Start(&error));
    auto st = p.Wait(Millis(10000));
    REQUIRE(st);
    std::string err = ReadFile(dir.File("bad.stderr"));
    INFO(err);
    CHECK(st->code == 2);
    CHECK(err.find(b.expect) != std::string::npos);
    CHECK(Count(err, "\n") == 1);
  }
}

TEST_CASE("plain HTTP only on loopback unless --insecure-http", "[tls]") {
  TempDir dir("gleaner-tls-listen");
  std::string error;
  Process refused({"gleaner-coordinator",
                   {"serve", "--db", dir.File("db.sqlite"), "--data-dir", dir.File("data"),
                    "--listen", "0.0.0.0:0"},
                   {},
                   {"GLEANER_INSECURE_HTTP", "GLEANER_CONFIG", "GLEANER_TLS_CERT"},
                   "",
                   "",
                   dir.File("refused.stderr")});
  REQUIRE(refused.Start(&error));
  auto st = refused.Wait(Millis(10000));
  REQUIRE(st);
  std::string err = ReadFile(dir.File("refused.stderr"));
  INFO(err);
  CHECK(st->code == 2);
  CHECK(Count(err, "\n") == 1);
  CHECK(err.find("0.0.0.0 is not a loopback address") != std::string::npos);
  CHECK(err.find("--insecure-http") != std::string::npos);

  CoordinatorOptions o;
  o.extra_args = {"--listen", "0.0.0.0:0", "--insecure-http"};
  CoordinatorProcess behind_proxy(dir.path(), o);
  REQUIRE(behind_proxy.Start(&error));
  CHECK(behind_proxy.Client().Get("/healthz").status == 200);
}

TEST_CASE("HTTPS: the gleaner CLI verifies the certificate, and --ca-file pins a private CA",
          "[tls][cli]") {
  TempDir dir("gleaner-tls-cli");
  TestCa ca;
  CoordinatorTls tls = MakeTls(dir, ca, 30);
  Fleet fleet(dir.path(), 0.2, {}, {}, tls);
  INFO(fleet.error());
  REQUIRE(fleet.ok());
  CoordinatorProcess& coord = fleet.coordinator();
  auto run_cli = [&](const std::string& name, std::vector<std::string> args,
                     std::vector<std::pair<std::string, std::string>> env) {
    ProcessSpec spec;
    spec.binary = BinPath("gleaner");
    spec.args = std::move(args);
    spec.env = std::move(env);
    spec.env.emplace_back("GLEANER_URL", coord.url());
    spec.env.emplace_back("GLEANER_TOKEN", coord.options().operator_token);
    spec.unset_env = {"GLEANER_CA_FILE"};
    spec.stdout_path = dir.File(name + ".out");
    spec.stderr_path = dir.File(name + ".err");
    auto p = std::make_unique<Process>(spec);
    std::string error;
    REQUIRE(p->Start(&error));
    std::optional<ExitStatus> st = p->Wait(Millis(20000));
    REQUIRE(st);
    return std::make_pair(*st, p->Stderr());
  };
  // The system CAs do not know this private CA: refused, one line, network exit code (3).
  auto [refused, refused_err] = run_cli("system", {"nodes", "--json"}, {});
  INFO(refused_err);
  CHECK(refused.code == 3);
  CHECK(Count(refused_err, "\n") == 1);
  CHECK(refused_err.find("certificate") != std::string::npos);
  // --ca-file and GLEANER_CA_FILE both pin it.
  auto [flag, flag_err] = run_cli("flag", {"--ca-file", tls.ca_file, "nodes", "--json"}, {});
  INFO(flag_err);
  CHECK(flag.code == 0);
  auto [env, env_err] = run_cli("env", {"nodes", "--json"}, {{"GLEANER_CA_FILE", tls.ca_file}});
  INFO(env_err);
  CHECK(env.code == 0);
  // A CA file that does not exist is a usage error, not a silent fallback.
  auto [missing, missing_err] =
      run_cli("missing", {"--ca-file", dir.File("nope.pem"), "nodes"}, {});
  CHECK(missing.code == 1);
  CHECK(missing_err.find("CA file") != std::string::npos);
}
