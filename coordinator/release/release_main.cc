// gleaner-release: offline tool for signed agent releases (see docs/agent.md).
//   gleaner-release keygen --private FILE --public FILE
//   gleaner-release sign --key FILE --manifest FILE [--out FILE]
//   gleaner-release verify --keys FILE --envelope FILE [--now UNIX_SECONDS] [--min-version V]
// Exit status: 0 ok, 1 verification refused, 64 usage or input error.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <string>

#include "shared/native/files.h"
#include "shared/native/release_sign.h"
#include "shared/sha256.h"

using namespace gleaner;
using namespace gleaner::release;

namespace {

const char kUsage[] =
    "usage:\n"
    "  gleaner-release keygen --private FILE --public FILE\n"
    "  gleaner-release sign --key FILE --manifest FILE [--out FILE]\n"
    "  gleaner-release verify --keys FILE --envelope FILE [--now UNIX_SECONDS] "
    "[--min-version V]\n";

int Fail(const std::string& msg, int rc = 64) {
  std::fprintf(stderr, "gleaner-release: %s\n", msg.c_str());
  return rc;
}

std::string Trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

int Keygen(std::map<std::string, std::string>& f) {
  if (f["private"].empty() || f["public"].empty())
    return Fail("keygen needs --private and --public");
  if (files::Exists(f["private"])) return Fail("refusing to overwrite " + f["private"]);
  Result<KeyPair> kp = GenerateKeyPair();
  if (!kp.ok()) return Fail(kp.status().message());
  Status s = files::WriteDurable(f["private"], kp->private_pem, 0600);
  if (s.ok()) s = files::WriteDurable(f["public"], kp->public_hex + "\n", 0644);
  if (!s.ok()) return Fail(s.message());
  std::string raw;
  HexDecode(kp->public_hex, &raw);
  std::printf("key_id %s\n", KeyIdOf(raw).c_str());
  return 0;
}

int Sign(std::map<std::string, std::string>& f) {
  if (f["key"].empty() || f["manifest"].empty()) return Fail("sign needs --key and --manifest");
  Result<std::string> key = files::ReadAll(f["key"], 64 * 1024);
  Result<std::string> manifest = files::ReadAll(f["manifest"], kMaxEnvelopeBytes);
  if (!key.ok()) return Fail(key.status().message());
  if (!manifest.ok()) return Fail(manifest.status().message());
  Result<Envelope> e = SignManifest(key.value(), Trimmed(manifest.value()));
  if (!e.ok()) return Fail(e.status().message());
  std::string json = EnvelopeToJson(e.value()) + "\n";
  if (f["out"].empty()) {
    std::fputs(json.c_str(), stdout);
    return 0;
  }
  Status s = files::WriteDurable(f["out"], json);
  return s.ok() ? 0 : Fail(s.message());
}

int Verify(std::map<std::string, std::string>& f) {
  if (f["keys"].empty() || f["envelope"].empty()) return Fail("verify needs --keys and --envelope");
  Result<std::string> keys = files::ReadAll(f["keys"], 64 * 1024);
  Result<std::string> env = files::ReadAll(f["envelope"], kMaxEnvelopeBytes + 16);
  if (!keys.ok()) return Fail(keys.status().message());
  if (!env.ok()) return Fail(env.status().message());
  Result<KeyRing> ring = ParseKeyRing(keys.value());
  if (!ring.ok()) return Fail(ring.status().message());
  Result<Envelope> e = ParseEnvelope(Trimmed(env.value()));
  if (!e.ok()) return Fail(e.status().message());
  Result<Manifest> m = VerifyEnvelope(e.value(), ring.value());
  if (!m.ok()) return Fail(m.status().message(), 1);
  int64_t now = f["now"].empty() ? int64_t(std::time(nullptr)) : std::atoll(f["now"].c_str());
  std::optional<Version> min;
  if (!f["min-version"].empty()) {
    Result<Version> v = ParseVersion(f["min-version"]);
    if (!v.ok()) return Fail("--min-version: " + v.status().message());
    min = v.value();
  }
  Status trust = CheckTrust(m.value(), min, now);
  if (!trust.ok()) return Fail(trust.message(), 1);
  std::printf("ok version %s channel %s key %s\n", m->version.ToString().c_str(),
              m->channel.c_str(), e->key_id.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 64 : 0;
  }
  std::map<std::string, std::string> flags;
  for (int i = 2; i < argc; i += 2) {
    if (std::strncmp(argv[i], "--", 2) != 0 || i + 1 >= argc) {
      return Fail(std::string("bad argument ") + argv[i] + "\n" + kUsage);
    }
    flags[argv[i] + 2] = argv[i + 1];
  }
  std::string cmd = argv[1];
  if (cmd == "keygen") return Keygen(flags);
  if (cmd == "sign") return Sign(flags);
  if (cmd == "verify") return Verify(flags);
  return Fail("unknown command " + cmd + "\n" + kUsage);
}
