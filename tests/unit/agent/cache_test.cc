#include "agent/supervisor/cache.h"

#include <sys/stat.h>
#include <utime.h>

#include <catch2/catch.hpp>

#include "fake_http.h"
#include "shared/native/files.h"
#include "shared/sha256.h"
#include "test_util.h"

using namespace gleaner;
using namespace gleaner::agent;
using gleaner::testing::FakeHttp;
using gleaner::testing::Reply;
using gleaner::testing::TempDir;

namespace {

// A store that serves url "http://s/<content>" with body <content> (or tampered bytes).
struct Store {
  bool tamper = false;
  int gets = 0;
  Result<net::HttpResponse> Handle(const net::HttpCall& c) {
    ++gets;
    std::string body = c.url.substr(std::string("http://s/").size());
    if (tamper) body[0] ^= 1;
    REQUIRE(files::WriteSynced(c.download_file, body).ok());
    return Reply(200, "");
  }
};

RemoteObject Obj(const std::string& content) {
  return RemoteObject{"in", "http://s/" + content, Sha256Hex(content), int64_t(content.size())};
}

}  // namespace

TEST_CASE("the input cache verifies downloads and reuses them by sha256", "[cache]") {
  TempDir t;
  Store store;
  FakeHttp http([&](const net::HttpCall& c) { return store.Handle(c); });
  CoordinatorApi api(&http, "http://coord");
  REQUIRE(files::MakeDirs(t / "cache").ok());
  BlobCache cache(t / "cache", 1 << 20);
  auto p = cache.Fetch(&api, Obj("dataset-bytes"));
  REQUIRE(p.ok());
  CHECK(*files::ReadAll(*p) == "dataset-bytes");
  auto again = cache.Fetch(&api, Obj("dataset-bytes"));
  REQUIRE(again.ok());
  CHECK(store.gets == 1);  // served from the cache

  store.tamper = true;
  auto bad = cache.Fetch(&api, Obj("other-bytes"));
  CHECK(bad.status().code() == Code::kCorruption);
  CHECK_FALSE(files::Exists(t / ("cache/" + Sha256Hex("other-bytes"))));
  RemoteObject wrong_size = Obj("sized");
  wrong_size.size = 99;
  store.tamper = false;
  CHECK(cache.Fetch(&api, wrong_size).status().code() == Code::kCorruption);
}

TEST_CASE("the input cache evicts least recently used files over its cap", "[cache]") {
  TempDir t;
  Store store;
  FakeHttp http([&](const net::HttpCall& c) { return store.Handle(c); });
  CoordinatorApi api(&http, "http://coord");
  REQUIRE(files::MakeDirs(t / "cache").ok());
  BlobCache cache(t / "cache", 25);  // room for two 10-byte files
  std::string a = *cache.Fetch(&api, Obj("aaaaaaaaaa"));
  std::string b = *cache.Fetch(&api, Obj("bbbbbbbbbb"));
  std::string c = *cache.Fetch(&api, Obj("cccccccccc"));
  // Make a the oldest use, b newer, c newest.
  struct utimbuf old_time = {1000, 1000}, mid_time = {2000, 2000};
  utime(a.c_str(), &old_time);
  utime(b.c_str(), &mid_time);
  cache.Evict({c});
  CHECK_FALSE(files::Exists(a));
  CHECK(files::Exists(b));
  CHECK(files::Exists(c));
  cache.Evict({b, c});  // within the cap now: nothing else goes
  CHECK(files::Exists(b));
}
