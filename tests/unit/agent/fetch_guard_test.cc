// What the agent fetches (docs/agent.md "What the agent fetches"): the address classifier, the
// guard on every connection of a remote download (a real libcurl client against local
// servers that record whether anything reached them), redirects that are never followed, and
// the size cap of every download.
#include <httplib.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <thread>

#include "agent/supervisor/api.h"
#include "agent/supervisor/cache.h"
#include "shared/native/address_guard.h"
#include "shared/native/curl_http.h"
#include "shared/native/files.h"
#include "shared/sha256.h"
#include "test_util.h"
#include "tests/counting_server.h"

using namespace gleaner;
using namespace gleaner::agent;
using gleaner::net::AddressClass;
using gleaner::testing::CountingServer;
using gleaner::testing::TempDir;

namespace {

int64_t FileSize(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? int64_t(st.st_size) : -1;
}

const std::string kSecret = "the secret of the LAN";  // 21 bytes

}  // namespace

TEST_CASE("address classifier: IPv4, IPv6, embedded IPv4 and edges", "[fetch_guard]") {
  struct Row {
    const char* address;
    AddressClass want;
  };
  const Row rows[] = {
      {"8.8.8.8", AddressClass::kPublic},
      {"1.1.1.1", AddressClass::kPublic},
      {"0.0.0.0", AddressClass::kUnspecified},
      {"0.255.255.255", AddressClass::kUnspecified},
      {"1.0.0.0", AddressClass::kPublic},
      {"127.0.0.1", AddressClass::kLoopback},
      {"127.255.255.254", AddressClass::kLoopback},
      {"126.255.255.255", AddressClass::kPublic},
      {"128.0.0.0", AddressClass::kPublic},
      {"10.0.0.1", AddressClass::kPrivate},
      {"10.255.255.255", AddressClass::kPrivate},
      {"11.0.0.0", AddressClass::kPublic},
      {"9.255.255.255", AddressClass::kPublic},
      {"172.16.0.0", AddressClass::kPrivate},
      {"172.31.255.255", AddressClass::kPrivate},
      {"172.15.255.255", AddressClass::kPublic},
      {"172.32.0.0", AddressClass::kPublic},
      {"192.168.1.1", AddressClass::kPrivate},
      {"192.169.0.0", AddressClass::kPublic},
      {"100.64.0.0", AddressClass::kPrivate},
      {"100.127.255.255", AddressClass::kPrivate},
      {"100.63.255.255", AddressClass::kPublic},
      {"100.128.0.0", AddressClass::kPublic},
      {"169.254.169.254", AddressClass::kLinkLocal},
      {"169.254.0.1", AddressClass::kLinkLocal},
      {"169.253.255.255", AddressClass::kPublic},
      {"224.0.0.1", AddressClass::kMulticast},
      {"239.255.255.250", AddressClass::kMulticast},
      {"240.0.0.1", AddressClass::kReserved},
      {"255.255.255.255", AddressClass::kReserved},
      {"192.0.2.1", AddressClass::kReserved},
      {"198.18.0.1", AddressClass::kReserved},
      {"198.19.255.255", AddressClass::kReserved},
      {"198.20.0.0", AddressClass::kPublic},
      {"203.0.113.9", AddressClass::kReserved},
      {"::", AddressClass::kUnspecified},
      {"::1", AddressClass::kLoopback},
      {"::2", AddressClass::kReserved},
      {"2606:4700:4700::1111", AddressClass::kPublic},
      {"2001:4860:4860::8888", AddressClass::kPublic},
      {"fe80::1", AddressClass::kLinkLocal},
      {"febf:ffff::1", AddressClass::kLinkLocal},
      {"fec0::1", AddressClass::kPrivate},
      {"fc00::1", AddressClass::kPrivate},
      {"fd12:3456::1", AddressClass::kPrivate},
      {"fe00::1", AddressClass::kPublic},
      {"ff02::1", AddressClass::kMulticast},
      {"ff0e::1", AddressClass::kMulticast},
      {"2001:db8::1", AddressClass::kReserved},
      {"2001:0:4136:e378::1", AddressClass::kReserved},  // Teredo
      {"100::1", AddressClass::kReserved},
      // IPv4 inside IPv6: the IPv4 address decides.
      {"::ffff:127.0.0.1", AddressClass::kLoopback},
      {"::ffff:7f00:1", AddressClass::kLoopback},
      {"::ffff:10.1.2.3", AddressClass::kPrivate},
      {"::ffff:169.254.169.254", AddressClass::kLinkLocal},
      {"::ffff:0.0.0.0", AddressClass::kUnspecified},
      {"::ffff:224.0.0.1", AddressClass::kMulticast},
      {"::ffff:8.8.8.8", AddressClass::kPublic},
      {"::ffff:0:127.0.0.1", AddressClass::kLoopback},
      {"::127.0.0.1", AddressClass::kReserved},
      {"64:ff9b::7f00:1", AddressClass::kLoopback},
      {"64:ff9b::a9fe:a9fe", AddressClass::kLinkLocal},
      {"64:ff9b::808:808", AddressClass::kPublic},
      {"64:ff9b:1::1", AddressClass::kReserved},
      {"2002:7f00:1::1", AddressClass::kLoopback},
      {"2002:c0a8:101::1", AddressClass::kPrivate},
      {"2002:808:808::1", AddressClass::kPublic},
      {"not an address", AddressClass::kReserved},
      {"", AddressClass::kReserved},
  };
  for (const Row& r : rows) {
    INFO(r.address);
    CHECK(net::AddressClassName(net::ClassifyAddressText(r.address)) ==
          std::string(net::AddressClassName(r.want)));
  }
  // Only public addresses pass; the owner's opt-in adds loopback and private, never the rest.
  CHECK(net::AddressAllowed(AddressClass::kPublic, false));
  for (AddressClass c :
       {AddressClass::kLoopback, AddressClass::kPrivate, AddressClass::kLinkLocal,
        AddressClass::kMulticast, AddressClass::kUnspecified, AddressClass::kReserved}) {
    CHECK(!net::AddressAllowed(c, false));
  }
  CHECK(net::AddressAllowed(AddressClass::kLoopback, true));
  CHECK(net::AddressAllowed(AddressClass::kPrivate, true));
  CHECK(!net::AddressAllowed(AddressClass::kLinkLocal, true));
  CHECK(!net::AddressAllowed(AddressClass::kMulticast, true));
  CHECK(!net::AddressAllowed(AddressClass::kUnspecified, true));
}

TEST_CASE("a remote download to loopback is refused before any byte is sent", "[fetch_guard]") {
  CountingServer s;
  s.server.Get("/secret", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(kSecret, "text/plain");
  });
  s.Start();
  TempDir dir;
  net::CurlHttpClient http;
  CoordinatorApi api(&http, s.Url(""));
  const std::string path = dir / "got";
  // By address and by a name that resolves to it; the request never reaches the server.
  for (const std::string& url : {s.Url("/secret"), s.Url("/secret", "localhost")}) {
    INFO(url);
    Status st = DownloadVerified(&api, url, Sha256Hex("x"), 10, path, false, /*remote=*/true);
    CHECK(st.code() == Code::kInvalidArgument);
    CHECK(st.message().find("refused to connect to") != std::string::npos);
    CHECK(st.message().find("(loopback)") != std::string::npos);
    CHECK(!files::Exists(path));
  }
  net::HttpCall call;
  call.url = s.Url("/secret");
  call.public_only = true;
  CHECK(!http.Send(call).ok());
  CHECK(s.requests.load() == 0);

  // The same URL from the coordinator (not remote) is fetched as always.
  Status own = DownloadVerified(&api, s.Url("/secret"), Sha256Hex(kSecret), int64_t(kSecret.size()),
                                path, false, /*remote=*/false);
  CHECK(own.ok());
  CHECK(s.requests.load() == 1);

  // An owner who opted in (--allow-private-fetch) may fetch from a mirror on the LAN.
  net::CurlHttpClient lan(net::CurlOptions{"", /*allow_private_fetch=*/true});
  CoordinatorApi lan_api(&lan, s.Url(""));
  files::RemoveTree(path);
  CHECK(DownloadVerified(&lan_api, s.Url("/secret"), Sha256Hex(kSecret), int64_t(kSecret.size()),
                         path, false, /*remote=*/true)
            .ok());
  CHECK(s.requests.load() == 2);
  // A remote URL is never resolved against the coordinator.
  CHECK(lan_api.GetFile("/secret", path, 0, -1, /*remote=*/true).code() == Code::kInvalidArgument);
  CHECK(s.requests.load() == 2);
}

TEST_CASE("a redirect is never followed: the download fails and its target sees nothing",
          "[fetch_guard]") {
  CountingServer target;
  target.server.Get("/secret", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(kSecret, "text/plain");
  });
  target.Start();
  CountingServer mirror;  // an allowed mirror (the owner opted in) that redirects
  const std::string to = target.Url("/secret");
  mirror.server.Get("/model.json", [&](const httplib::Request&, httplib::Response& res) {
    res.set_redirect(to, 302);
  });
  mirror.Start();
  TempDir dir;
  net::CurlHttpClient lan(net::CurlOptions{"", /*allow_private_fetch=*/true});
  CoordinatorApi api(&lan, mirror.Url(""));
  for (bool remote : {true, false}) {
    Status st = DownloadVerified(&api, mirror.Url("/model.json"), Sha256Hex(kSecret),
                                 int64_t(kSecret.size()), dir / "got", false, remote);
    CHECK(!st.ok());
    CHECK(st.message().find("HTTP 302") != std::string::npos);
    CHECK(!files::Exists(dir / "got"));
  }
  CHECK(mirror.requests.load() == 2);
  CHECK(target.requests.load() == 0);
}

TEST_CASE("every download stops at its declared size", "[fetch_guard]") {
  constexpr size_t kServed = size_t(30) << 20;  // 30 MiB against a declared 10 bytes
  TempDir dir;
  const std::string path = dir / "model.part";
  std::atomic<int64_t> largest_seen{-1};  // the file's size as the server saw it while sending
  std::atomic<size_t> sent{0};
  CountingServer s;
  // Without Content-Length (chunked): the cap must stop the body itself.
  s.server.Get("/chunked", [&](const httplib::Request&, httplib::Response& res) {
    res.set_chunked_content_provider(
        "application/octet-stream", [&](size_t offset, httplib::DataSink& sink) {
          largest_seen = std::max<int64_t>(largest_seen.load(), FileSize(path));
          if (offset >= kServed) {
            sink.done();
            return true;
          }
          std::string chunk(64 << 10, 'x');
          if (!sink.write(chunk.data(), chunk.size())) return false;
          sent += chunk.size();
          return true;
        });
  });
  // With a Content-Length that announces more than declared: refused before the body.
  s.server.Get("/announced", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content_provider(kServed, "application/octet-stream",
                             [&](size_t offset, size_t length, httplib::DataSink& sink) {
                               largest_seen =
                                   std::max<int64_t>(largest_seen.load(), FileSize(path));
                               std::string chunk(std::min<size_t>(length, 64 << 10), 'x');
                               (void)offset;
                               return sink.write(chunk.data(), chunk.size());
                             });
  });
  s.Start();
  net::CurlHttpClient http;
  CoordinatorApi api(&http, s.Url(""));
  for (const char* route : {"/chunked", "/announced"}) {
    INFO(route);
    largest_seen = -1;
    Status st = DownloadVerified(&api, route, Sha256Hex("0123456789"), 10, path);
    CHECK(st.code() == Code::kCorruption);
    const bool says_why = st.message().find("declared size of 10 bytes") != std::string::npos ||
                          st.message().find("more than the declared 10 bytes") != std::string::npos;
    CHECK(says_why);
    CHECK(largest_seen.load() <= 10);
    CHECK(!files::Exists(path));  // what arrived is deleted with the failure
  }
  // The client itself never writes past the cap, even before the caller cleans up.
  net::HttpCall call;
  call.url = s.Url("/chunked");
  call.download_file = path;
  call.max_bytes = 10;
  Result<net::HttpResponse> r = http.Send(call);
  CHECK(r.status().code() == Code::kCorruption);
  CHECK(FileSize(path) <= 10);
  CHECK(sent.load() < kServed);
  // A resumed download counts what it already has: 6 bytes + a 206 of more than 4 is refused.
  s.server.Get("/ranged", [](const httplib::Request& req, httplib::Response& res) {
    if (req.has_header("Range")) {
      res.status = 206;
      res.set_content("6789-and-more", "application/octet-stream");
      return;
    }
    res.set_content("0123456789", "application/octet-stream");
  });
  REQUIRE(files::WriteDurable(path, "012345").ok());
  Status resumed = DownloadVerified(&api, "/ranged", Sha256Hex("0123456789"), 10, path, true);
  CHECK(resumed.code() == Code::kCorruption);
  CHECK(!files::Exists(path));
  // A download of exactly the declared size still works, resumed or not.
  CHECK(DownloadVerified(&api, "/ranged", Sha256Hex("0123456789"), 10, path, true).ok());
}

TEST_CASE("a claim marks model files given by URL as remote", "[fetch_guard]") {
  Json claim = {{"inputs",
                 {{"model",
                   {{"files",
                     {{{"path", "model_index.json"},
                       {"url", "http://127.0.0.1:1/v1/blobs/uploads/a/b?sig=x"},
                       {"sha256", Sha256Hex("a")},
                       {"size", 1}},
                      {{"path", "scheduler/scheduler_config.json"},
                       {"url", "https://models.example/s.json"},
                       {"remote", true},
                       {"sha256", Sha256Hex("b")},
                       {"size", 1}}}}}}}}};
  Result<Downloads> d = ParseDownloads(claim);
  REQUIRE(d.ok());
  REQUIRE(d->inputs.size() == 2);
  CHECK(!d->inputs[0].remote);
  CHECK(d->inputs[1].remote);
}
