// TLS-related serve options: --tls-cert/--tls-key, --insecure-http, the loopback rule, the
// public URL's scheme.
#include <catch2/catch.hpp>
#include <map>

#include "coordinator/native/options.h"

using namespace gleaner;
using namespace gleaner::native;

namespace {

Result<ServeOptions> Parse(std::vector<std::string> extra,
                           std::map<std::string, std::string> env = {}) {
  std::vector<std::string> args = {"--db", "x.db", "--data-dir", "d"};
  args.insert(args.end(), extra.begin(), extra.end());
  return ParseServeOptions(
      args,
      [&env](const std::string& n) -> const char* {
        auto it = env.find(n);
        return it == env.end() ? nullptr : it->second.c_str();
      },
      [](const std::string&) -> Result<std::string> { return Status::NotFound("no files"); });
}

}  // namespace

TEST_CASE("loopback hosts", "[options][tls]") {
  for (const char* h : {"127.0.0.1", "127.1.2.3", "::1", "localhost", "::ffff:127.0.0.1"}) {
    INFO(h);
    CHECK(IsLoopbackHost(h));
  }
  for (const char* h : {"0.0.0.0", "::", "10.0.0.1", "192.168.1.2", "::ffff:10.0.0.1",
                        "example.com", "128.0.0.1", ""}) {
    INFO(h);
    CHECK_FALSE(IsLoopbackHost(h));
  }
}

TEST_CASE("plain HTTP is refused on a non-loopback address unless --insecure-http",
          "[options][tls]") {
  for (const char* listen : {"0.0.0.0:8080", ":8080", "[::]:8080", "10.1.2.3:80"}) {
    INFO(listen);
    auto o = Parse({"--listen", listen});
    REQUIRE_FALSE(o.ok());
    CHECK(o.status().message().find("not a loopback address") != std::string::npos);
    CHECK(o.status().message().find("--insecure-http") != std::string::npos);
    CHECK(o.status().message().find('\n') == std::string::npos);
  }
  auto o = Parse({"--listen", "0.0.0.0:8080", "--insecure-http"});
  REQUIRE(o.ok());
  CHECK(o->insecure_http);
  CHECK(o->core.public_url == "http://0.0.0.0:8080");
  o = Parse({"--listen", "0.0.0.0:8080"}, {{"GLEANER_INSECURE_HTTP", "1"}});
  REQUIRE(o.ok());
  o = Parse({"--listen", "0.0.0.0:8080", "--insecure-http=false"},
            {{"GLEANER_INSECURE_HTTP", "1"}});
  CHECK_FALSE(o.ok());
  // Loopback needs neither.
  CHECK(Parse({"--listen", "127.0.0.1:0"}).ok());
  CHECK(Parse({"--listen", "[::1]:0"}).ok());
}

TEST_CASE("TLS flags: both or neither, https public URL, any address", "[options][tls]") {
  auto o = Parse({"--listen", "0.0.0.0:8443", "--tls-cert", "c.pem", "--tls-key", "k.pem"});
  REQUIRE(o.ok());
  CHECK(o->tls_cert == "c.pem");
  CHECK(o->tls_key == "k.pem");
  CHECK(o->core.public_url == "https://0.0.0.0:8443");
  o = Parse({"--tls-cert", "c.pem", "--tls-key", "k.pem", "--public-url", "https://g.example/"});
  REQUIRE(o.ok());
  CHECK(o->core.public_url == "https://g.example");
  for (auto args :
       std::vector<std::vector<std::string>>{{"--tls-cert", "c.pem"}, {"--tls-key", "k.pem"}}) {
    o = Parse(args);
    REQUIRE_FALSE(o.ok());
    CHECK(o.status().message() == "--tls-cert and --tls-key go together");
  }
  std::string usage = ServeUsage();
  for (const char* flag : {"--tls-cert", "--tls-key", "--insecure-http"}) {
    CHECK(usage.find(flag) != std::string::npos);
  }
}
