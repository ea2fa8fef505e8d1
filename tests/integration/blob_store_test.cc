// The built-in blob store over real HTTP: URLs minted by the API, streamed by the shell.
#include <dirent.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "shared/sha256.h"
#include "tests/integration/coordinator_fixture.h"
#include "tests/integration/harness.h"

using namespace gleaner;
using namespace gleaner::testing;

namespace {

// Value of a query parameter in a URL ("" if absent).
std::string QueryParam(const std::string& url, const std::string& name) {
  size_t q = url.find('?');
  if (q == std::string::npos) return "";
  std::string query = "&" + url.substr(q + 1);
  size_t p = query.find("&" + name + "=");
  if (p == std::string::npos) return "";
  size_t start = p + name.size() + 2;
  return query.substr(start, query.find('&', start) - start);
}

std::string ReplaceParam(const std::string& url, const std::string& name, const std::string& v) {
  std::string old = QueryParam(url, name);
  size_t p = url.find(name + "=" + old);
  return url.substr(0, p) + name + "=" + v + url.substr(p + name.size() + 1 + old.size());
}

int CountFiles(const std::string& dir) {
  int n = 0;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      if (std::string(e->d_name) != "." && std::string(e->d_name) != "..") ++n;
    }
    ::closedir(d);
  }
  return n;
}

struct Upload {
  std::string uri, url, key;
};

Upload MintUpload(HttpClient& dev, const std::string& name, const std::string& bytes) {
  HttpResult r =
      dev.Post("/v1/uploads",
               {{"name", name}, {"size", int64_t(bytes.size())}, {"sha256", Sha256Hex(bytes)}});
  INFO(r.Describe());
  REQUIRE(r.status / 100 == 2);
  Json j = r.json();
  Upload u{j["uri"].get<std::string>(), j["url"].get<std::string>(), ""};
  REQUIRE(u.uri.rfind("blob://", 0) == 0);
  u.key = u.uri.substr(7);
  return u;
}

}  // namespace

TEST_CASE("blob PUT/GET round trip through signed URLs", "[coordinator][blobs]") {
  TempDir dir;
  CoordinatorProcess coord(dir.path());
  std::string error;
  REQUIRE(coord.Start(&error));
  auto dev_token = CreateKey(coord, "developer", &error);
  REQUIRE(dev_token);
  HttpClient dev = coord.Client(*dev_token);

  std::string data;
  for (int i = 0; i < 3000000; ++i) data.push_back(char('a' + i % 26));
  Upload up = MintUpload(dev, "data.bin", data);
  REQUIRE(up.url.rfind(coord.url() + "/blobs/", 0) == 0);

  // Wrong signature, wrong key, wrong method: refused, nothing stored.
  std::string bad_sig = ReplaceParam(up.url, "sig", std::string(64, '0'));
  HttpResult r = HttpClient::Fetch("PUT", bad_sig, data);
  CHECK(r.status == 403);
  CHECK(r.json()["error"]["code"] == "forbidden");
  std::string other_key = up.url;
  other_key.insert(other_key.find('?'), "x");
  CHECK(HttpClient::Fetch("PUT", other_key, data).status == 403);
  CHECK(HttpClient::Fetch("GET", up.url).status == 403);  // a PUT URL does not allow GET

  // Too large (over the declared size) → 413; same size, other bytes → 400 (sha256).
  r = HttpClient::Fetch("PUT", up.url, data + "x");
  INFO(r.Describe());
  CHECK(r.status == 413);
  CHECK(r.json()["error"]["code"] == "too_large");
  std::string other = data;
  other[100] = '!';
  r = HttpClient::Fetch("PUT", up.url, other);
  CHECK(r.status == 400);
  CHECK(r.json()["error"]["message"].get<std::string>().find("sha256") != std::string::npos);
  CHECK(!ReadFile(dir.File("data/blobs/" + up.key), "").size());
  CHECK(CountFiles(dir.File("data/blobs/.tmp")) == 0);  // failed writes leave no temp file

  // The real thing.
  r = HttpClient::Fetch("PUT", up.url, data);
  INFO(r.Describe());
  REQUIRE(r.status / 100 == 2);
  CHECK(ReadFile(dir.File("data/blobs/" + up.key)) == data);
  CHECK(CountFiles(dir.File("data/blobs/.tmp")) == 0);

  // Downloads come from a GET URL the core mints: a job using the upload, claimed by a node.
  auto enroll = CreateKey(coord, "enroll", &error);
  REQUIRE(enroll);
  auto node = RegisterNode(coord, *enroll, "m-blob", 24000, &error);
  REQUIRE(node);
  auto job = SubmitSyntheticJob(dev, 10, 5, &error,
                                {{"dataset", {{"uri", up.uri}, {"sha256", Sha256Hex(data)}}}});
  INFO(error);
  REQUIRE(job);
  HttpClient nc = coord.Client(node->token);
  HttpResult work = nc.Post("/v1/work", Json::object());
  INFO(work.Describe());
  REQUIRE(work.status == 200);
  std::string get_url = work.json()["inputs"]["dataset"]["url"].get<std::string>();
  r = HttpClient::Fetch("GET", get_url);
  CHECK(r.status == 200);
  CHECK(r.body == data);
  CHECK(Sha256Hex(r.body) == Sha256Hex(data));
  // Range requests.
  r = HttpClient::Fetch("GET", get_url, "", "", {{"Range", "bytes=1000-1009"}});
  CHECK(r.status == 206);
  CHECK(r.body == data.substr(1000, 10));
  CHECK(r.Header("Content-Range") == "bytes 1000-1009/3000000");
  CHECK(HttpClient::Fetch("GET", get_url, "", "", {{"Range", "bytes=4000000-"}}).status == 416);
  // A GET URL does not allow PUT; a tampered expiry breaks the signature.
  CHECK(HttpClient::Fetch("PUT", get_url, "x").status == 403);
  CHECK(HttpClient::Fetch("GET", ReplaceParam(get_url, "exp", "9999999999")).status == 403);
}

TEST_CASE("blob URLs expire", "[coordinator][blobs]") {
  TempDir dir;
  CoordinatorOptions o;
  o.extra_args = {"--blob-url-ttl", "1"};
  CoordinatorProcess coord(dir.path(), o);
  std::string error;
  REQUIRE(coord.Start(&error));
  auto dev_token = CreateKey(coord, "developer", &error);
  REQUIRE(dev_token);
  HttpClient dev = coord.Client(*dev_token);
  Upload up = MintUpload(dev, "late.bin", "late bytes");
  int64_t exp_s = std::stoll(QueryParam(up.url, "exp"));
  // Wait for the wall clock to pass the URL's expiry (a condition, not a guess).
  REQUIRE(WaitUntil(
      [&] {
        return std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::system_clock::now().time_since_epoch())
                   .count() > exp_s * 1000 + 1000;
      },
      Millis(5000), Millis(20)));
  HttpResult r = HttpClient::Fetch("PUT", up.url, "late bytes");
  INFO(r.Describe());
  CHECK(r.status == 403);
  CHECK(r.json()["error"]["message"].get<std::string>().find("expire") != std::string::npos);
}

TEST_CASE("blob GET of a missing object is 404 and keys cannot escape the store",
          "[coordinator][blobs]") {
  TempDir dir;
  CoordinatorProcess coord(dir.path());
  std::string error;
  REQUIRE(coord.Start(&error));
  auto dev_token = CreateKey(coord, "developer", &error);
  REQUIRE(dev_token);
  HttpClient dev = coord.Client(*dev_token);
  // A completed upload whose file vanished from disk: GET answers 404 with the envelope.
  std::string bytes = "soon gone";
  Upload up = MintUpload(dev, "gone.bin", bytes);
  REQUIRE(HttpClient::Fetch("PUT", up.url, bytes).status / 100 == 2);
  auto enroll = CreateKey(coord, "enroll", &error);
  auto node = RegisterNode(coord, *enroll, "m-404", 24000, &error);
  REQUIRE(node);
  auto job = SubmitSyntheticJob(dev, 10, 5, &error,
                                {{"dataset", {{"uri", up.uri}, {"sha256", Sha256Hex(bytes)}}}});
  REQUIRE(job);
  HttpClient nc = coord.Client(node->token);
  HttpResult work = nc.Post("/v1/work", Json::object());
  REQUIRE(work.status == 200);
  std::string get_url = work.json()["inputs"]["dataset"]["url"].get<std::string>();
  REQUIRE(::unlink(dir.File("data/blobs/" + up.key).c_str()) == 0);
  HttpResult r = HttpClient::Fetch("GET", get_url);
  CHECK(r.status == 404);
  CHECK(r.json()["error"]["code"] == "not_found");
  // Traversal attempts never reach the filesystem (refused before or by signature checks).
  HttpClient raw = coord.Client();
  for (const char* path : {"/blobs/../signing.key", "/blobs/%2e%2e/signing.key",
                           "/blobs//etc/passwd", "/blobs/a/../../signing.key?m=GET&exp=1&sig=0"}) {
    HttpResult t = raw.Get(path);
    INFO(path << " " << t.Describe());
    CHECK(t.status >= 400);
    CHECK(t.body.find(ReadFile(dir.File("data/signing.key"))) == std::string::npos);
  }
}
