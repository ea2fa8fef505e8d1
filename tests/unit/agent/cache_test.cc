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

TEST_CASE("the input cache resumes a cut download with a Range request", "[cache]") {
  TempDir t;
  const std::string content = "0123456789abcdefghijklmnopqrstuvwxyz";
  std::vector<int64_t> asked_from;
  FakeHttp http([&](const net::HttpCall& c) -> Result<net::HttpResponse> {
    asked_from.push_back(c.resume_from);
    if (asked_from.size() == 1) {  // the connection breaks after 10 bytes
      REQUIRE(files::WriteSynced(c.download_file, content.substr(0, 10)).ok());
      return Status::Unavailable("connection reset");
    }
    std::string have = *files::ReadAll(c.download_file);
    REQUIRE(files::WriteSynced(c.download_file, have + content.substr(size_t(c.resume_from))).ok());
    return Reply(206, "");
  });
  CoordinatorApi api(&http, "http://coord");
  REQUIRE(files::MakeDirs(t / "cache").ok());
  BlobCache cache(t / "cache", 1 << 20);
  RemoteObject obj{"model", "http://s/x", Sha256Hex(content), int64_t(content.size()),
                   "unet/config.json"};
  auto first = cache.Fetch(&api, obj);
  CHECK(first.status().code() == Code::kUnavailable);
  const std::string part = t / ("cache/" + obj.sha256 + ".part");
  CHECK(*files::ReadAll(part) == content.substr(0, 10));
  auto second = cache.Fetch(&api, obj);
  REQUIRE(second.ok());
  CHECK(*files::ReadAll(*second) == content);
  CHECK(asked_from == std::vector<int64_t>{0, 10});
  CHECK_FALSE(files::Exists(part));

  // A cut-off download nobody comes back for ages out like any cached file.
  REQUIRE(files::WriteSynced(part, "stale").ok());
  struct utimbuf old_time = {1000, 1000};
  utime(part.c_str(), &old_time);
  BlobCache small(t / "cache", int64_t(content.size()));
  small.Evict({*second});
  CHECK_FALSE(files::Exists(part));
  CHECK(files::Exists(*second));
}
