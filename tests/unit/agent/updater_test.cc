// Self-update: every refusal keeps the running binary, every kill point of the switch leaves a
// verified binary behind `current`, and a crash loop restores the previous version.
#include "agent/supervisor/updater.h"

#include <catch2/catch.hpp>
#include <map>

#include "shared/native/files.h"
#include "shared/sha256.h"
#include "test_util.h"

using namespace gleaner;
using namespace gleaner::agent;
using namespace gleaner::release;
using gleaner::testing::TempDir;

namespace {

struct Fixture {
  TempDir dir;
  KeyPair key = GenerateKeyPair().value();
  KeyPair rogue = GenerateKeyPair().value();
  int64_t now = 1800000000;
  std::map<std::string, std::string> served;  // uri -> bytes
  bool endless = false;
  int self_tests = 0;
  bool self_test_ok = true;
  std::function<bool(int)> after_step;

  Updater Make() {
    UpdaterDeps d;
    d.now_s = [this] { return now; };
    d.download = [this](const std::string& uri,
                        const std::function<bool(std::string_view)>& sink) -> Status {
      if (endless) {
        while (sink(std::string(4096, 'x'))) {
        }
        return Status::Ok();
      }
      auto it = served.find(uri);
      if (it == served.end()) return Status::NotFound("404");
      for (size_t i = 0; i < it->second.size(); i += 7) {
        if (!sink(std::string_view(it->second).substr(i, 7))) break;
      }
      return Status::Ok();
    };
    d.self_test = [this](const std::string&) {
      ++self_tests;
      return self_test_ok;
    };
    d.after_step = [this](int step) { return !after_step || after_step(step); };
    return Updater(dir.path(), ParseKeyRing(key.public_hex).value(), "linux-x86_64", d);
  }

  // A signed release whose artifact is "binary <version>" served at /v.
  std::string Release(const std::string& version, const KeyPair* signer = nullptr,
                      int64_t expires = 0, int64_t length_delta = 0, bool bad_hash = false) {
    std::string bytes = "binary " + version;
    std::string uri = "https://dl.test/" + version;
    served[uri] = bytes;
    std::string m = R"({"version":")" + version + R"(","channel":"stable","expires":)" +
                    std::to_string(expires ? expires : now + 86400) +
                    R"(,"artifacts":{"linux-x86_64":{"uri":")" + uri + R"(","length":)" +
                    std::to_string(int64_t(bytes.size()) + length_delta) + R"(,"sha256":")" +
                    (bad_hash ? std::string(64, 'b') : Sha256Hex(bytes)) + R"("}}})";
    return EnvelopeToJson(SignManifest((signer ? signer : &key)->private_pem, m).value());
  }

  std::string CurrentBytes(const Updater& u) {
    Result<std::string> b = files::ReadAll(u.CurrentBinary());
    return b.ok() ? b.value() : "";
  }
};

}  // namespace

TEST_CASE("updater: a verified newer release is installed side by side and switched to",
          "[updater]") {
  Fixture f;
  Updater u = f.Make();
  REQUIRE(u.Install(f.Release("1.0.0")).ok());
  CHECK(u.CurrentVersion() == "1.0.0");
  Result<Version> v = u.Install(f.Release("1.1.0"));
  REQUIRE(v.ok());
  CHECK(v->ToString() == "1.1.0");
  CHECK(f.CurrentBytes(u) == "binary 1.1.0");
  CHECK(files::Exists(f.dir / "versions/1.0.0/gleaner-agent"));
  CHECK(u.HighestTrusted()->ToString() == "1.1.0");
  CHECK_FALSE(files::Exists(f.dir / "swapping"));
  CHECK(f.self_tests == 2);
}

TEST_CASE("updater: every refused release keeps the running binary", "[updater]") {
  Fixture f;
  Updater u = f.Make();
  REQUIRE(u.Install(f.Release("1.0.0")).ok());
  struct Case {
    const char* name;
    std::string envelope;
    Code code;
  };
  std::vector<Case> cases = {
      {"forged signature", "", Code::kPermissionDenied},
      {"unknown key", f.Release("2.0.0", &f.rogue), Code::kPermissionDenied},
      {"equal version", f.Release("1.0.0"), Code::kConflict},
      {"lower version", f.Release("0.9.0"), Code::kConflict},
      {"expired", f.Release("2.0.0", nullptr, f.now - 1), Code::kPermissionDenied},
      {"truncated download", f.Release("2.0.1", nullptr, 0, +5), Code::kCorruption},
      {"oversized download", f.Release("2.0.2", nullptr, 0, -3), Code::kCorruption},
      {"wrong hash", f.Release("2.0.3", nullptr, 0, 0, true), Code::kCorruption},
      {"malformed", "{\"manifest\":1}", Code::kInvalidArgument},
  };
  Envelope forged = ParseEnvelope(f.Release("2.0.0")).value();
  forged.signature[0] ^= 0x40;
  cases[0].envelope = EnvelopeToJson(forged);
  for (const Case& c : cases) {
    INFO(c.name);
    Result<Version> r = u.Install(c.envelope);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == c.code);
    CHECK(f.CurrentBytes(u) == "binary 1.0.0");
    CHECK(u.HighestTrusted()->ToString() == "1.0.0");
  }
  // An endless download is cut off just past the declared length.
  f.endless = true;
  Result<Version> r = u.Install(f.Release("3.0.0"));
  CHECK(r.status().code() == Code::kCorruption);
  CHECK(f.CurrentBytes(u) == "binary 1.0.0");
  f.endless = false;
  // A failing self-test leaves the old version and does not advance trust.
  f.self_test_ok = false;
  CHECK_FALSE(u.Install(f.Release("4.0.0")).ok());
  CHECK(f.CurrentBytes(u) == "binary 1.0.0");
  CHECK(u.HighestTrusted()->ToString() == "1.0.0");
  CHECK_FALSE(files::Exists(f.dir / "versions/4.0.0"));
}

TEST_CASE("updater: kill -9 after every step of the switch leaves a verified binary", "[updater]") {
  for (int kill_at = 1; kill_at <= 5; ++kill_at) {
    INFO("killed after step " << kill_at);
    Fixture f;
    {
      Updater u = f.Make();
      REQUIRE(u.Install(f.Release("1.0.0")).ok());
      f.after_step = [kill_at](int step) { return step != kill_at; };
      Result<Version> r = u.Install(f.Release("1.1.0"));
      REQUIRE_FALSE(r.ok());
      std::string bytes = f.CurrentBytes(u);
      CHECK((bytes == "binary 1.0.0" || bytes == "binary 1.1.0"));
    }
    f.after_step = nullptr;
    Updater again = f.Make();  // the restarted agent
    REQUIRE(again.Recover().ok());
    CHECK_FALSE(files::Exists(f.dir / "swapping"));
    std::string bytes = f.CurrentBytes(again);
    CHECK((bytes == "binary 1.0.0" || bytes == "binary 1.1.0"));
    if (bytes == "binary 1.1.0") CHECK(files::Exists(f.dir / "previous/gleaner-agent"));
    // Finishing the update afterwards works (also once trust has advanced to 1.1.0 but the
    // switch had not happened), or the switch had already completed (kill_at >= 4).
    Result<Version> r = again.Install(f.Release("1.1.0"));
    if (kill_at >= 4) {
      CHECK(r.status().code() == Code::kConflict);
    } else {
      CHECK(r.ok());
    }
    CHECK(f.CurrentBytes(again) == "binary 1.1.0");
    CHECK(again.Install(f.Release("1.1.0")).status().code() == Code::kConflict);
  }
}

TEST_CASE("updater: the installed binary is adopted as current when nothing newer is",
          "[updater]") {
  Fixture f;
  Updater u = f.Make();
  std::string installed = f.dir / "installed-agent";
  REQUIRE(files::WriteDurable(installed, "binary 0.5.0", 0755).ok());
  REQUIRE(u.Adopt(ParseVersion("0.5.0").value(), installed).ok());
  CHECK(u.CurrentVersion() == "0.5.0");
  CHECK(f.CurrentBytes(u) == "binary 0.5.0");
  CHECK(u.HighestTrusted()->ToString() == "0.5.0");
  CHECK(u.Install(f.Release("0.4.0")).status().code() == Code::kConflict);
  // An update makes the adopted version the rollback target.
  REQUIRE(u.Install(f.Release("1.0.0")).ok());
  CHECK(files::Exists(f.dir / "previous/gleaner-agent"));
  // A newer package installed by the owner is adopted too; trust never goes down.
  REQUIRE(files::WriteDurable(installed, "binary 2.0.0", 0755).ok());
  REQUIRE(u.Adopt(ParseVersion("2.0.0").value(), installed).ok());
  CHECK(f.CurrentBytes(u) == "binary 2.0.0");
  CHECK(u.HighestTrusted()->ToString() == "2.0.0");
  REQUIRE(u.Adopt(ParseVersion("0.5.0").value(), f.dir / "versions/0.5.0/gleaner-agent").ok());
  CHECK(u.HighestTrusted()->ToString() == "2.0.0");
  // A version rolled back after a crash loop is not adopted again.
  REQUIRE(files::MakeDirs(f.dir / "failed").ok());
  REQUIRE(files::WriteDurable(f.dir / "failed/3.0.0", "crash loop\n").ok());
  CHECK(u.Adopt(ParseVersion("3.0.0").value(), installed).code() == Code::kConflict);
}

TEST_CASE("updater: a crash loop restores the previous version and blocks the bad one",
          "[updater]") {
  Fixture f;
  Updater u = f.Make();
  REQUIRE(u.Install(f.Release("1.0.0")).ok());
  REQUIRE(u.Install(f.Release("1.1.0")).ok());
  // Starts spread over more than 5 minutes are not a loop.
  for (int i = 0; i < 4; ++i) {
    CHECK_FALSE(u.RecordStart().value());
    f.now += 200;
  }
  CHECK(u.CurrentVersion() == "1.1.0");
  // Three starts within 5 minutes are.
  f.now += 1000;
  CHECK_FALSE(u.RecordStart().value());
  f.now += 10;
  CHECK_FALSE(u.RecordStart().value());
  f.now += 10;
  CHECK(u.RecordStart().value());
  CHECK(u.CurrentVersion() == "1.0.0");
  CHECK(f.CurrentBytes(u) == "binary 1.0.0");
  CHECK(files::Exists(f.dir / "failed/1.1.0"));
  // A healthy run clears the history; the rolled-back release is never reinstalled.
  REQUIRE(u.MarkHealthy().ok());
  CHECK_FALSE(u.RecordStart().value());
  CHECK(u.Install(f.Release("1.1.0")).status().code() == Code::kConflict);
  CHECK(u.Install(f.Release("1.2.0")).ok());
}

TEST_CASE("updater: old versions are pruned, current and previous kept", "[updater]") {
  Fixture f;
  Updater u = f.Make();
  REQUIRE(u.Prune().ok());  // nothing installed yet
  REQUIRE(u.Install(f.Release("1.0.0")).ok());
  REQUIRE(u.Install(f.Release("1.1.0")).ok());
  REQUIRE(u.Install(f.Release("1.2.0")).ok());
  REQUIRE(u.Prune().ok());
  CHECK_FALSE(files::Exists(f.dir / "versions/1.0.0"));
  CHECK(f.CurrentBytes(u) == "binary 1.2.0");
  CHECK(files::Exists(f.dir / "previous/gleaner-agent"));
  CHECK(files::Exists(f.dir / "versions/1.1.0/gleaner-agent"));
}
