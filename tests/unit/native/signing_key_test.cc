#include "coordinator/native/blob/signing_key.h"

#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <thread>
#include <vector>

using namespace gleaner;
using namespace gleaner::native;

namespace {
struct Dir {
  Dir() {
    char t[] = "/tmp/gleaner-key-XXXXXX";
    path = ::mkdtemp(t);
  }
  ~Dir() {
    int rc = std::system(("rm -rf '" + path + "'").c_str());
    (void)rc;
  }
  std::string path;
};
}  // namespace

TEST_CASE("signing key: env wins, else created once with mode 0600 and reused", "[signing_key]") {
  Dir dir;
  auto env = LoadOrCreateSigningKey(DefaultFs(), dir.path, "0123456789abcdef-from-env");
  REQUIRE(env.ok());
  CHECK(*env == "0123456789abcdef-from-env");
  CHECK(LoadOrCreateSigningKey(DefaultFs(), dir.path, "short").status().code() ==
        Code::kInvalidArgument);

  auto first = LoadOrCreateSigningKey(DefaultFs(), dir.path, nullptr);
  REQUIRE(first.ok());
  CHECK(first->size() == 64);
  struct stat st;
  REQUIRE(::stat((dir.path + "/signing.key").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  auto again = LoadOrCreateSigningKey(DefaultFs(), dir.path, nullptr);
  REQUIRE(again.ok());
  CHECK(*again == *first);
}

TEST_CASE("signing key: concurrent creators agree on one key", "[signing_key]") {
  for (int round = 0; round < 5; ++round) {
    Dir dir;
    std::vector<std::string> keys(8);
    std::vector<std::thread> threads;
    for (size_t i = 0; i < keys.size(); ++i) {
      threads.emplace_back([&, i] {
        auto k = LoadOrCreateSigningKey(DefaultFs(), dir.path, nullptr);
        if (k.ok()) keys[i] = *k;
      });
    }
    for (auto& t : threads) t.join();
    for (const auto& k : keys) CHECK(k == keys[0]);
    CHECK(keys[0].size() == 64);
  }
}
