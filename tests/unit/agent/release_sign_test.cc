// Signed releases: manifest parsing, Ed25519 signing/verification and trust checks.
#include "shared/native/release_sign.h"

#include <catch2/catch.hpp>
#include <vector>

#include "shared/sha256.h"

using namespace gleaner;
using namespace gleaner::release;

namespace {

std::string ManifestText(const std::string& version, int64_t expires = 2000000000) {
  return R"({"version":")" + version + R"(","channel":"stable","expires":)" +
         std::to_string(expires) +
         R"(,"artifacts":{"linux-x86_64":{"uri":"https://example.test/a","length":10,"sha256":")" +
         std::string(64, 'a') + R"("}}})";
}

KeyRing RingOf(const KeyPair& kp) {
  Result<KeyRing> ring = ParseKeyRing("# pinned\n" + kp.public_hex + "\n");
  REQUIRE(ring.ok());
  return ring.value();
}

}  // namespace

TEST_CASE("release: versions parse strictly and order numerically", "[release]") {
  REQUIRE(ParseVersion("1.2.3").ok());
  CHECK(ParseVersion("1.10.0").value().Ordinal() > ParseVersion("1.9.99").value().Ordinal());
  for (const char* bad : {"", "1", "1.2", "1.2.3.4", "01.2.3", "1.2.x", "1..3", "1.2.3 ",
                          "1234567.0.0", "-1.2.3", "1.2.3-rc1"}) {
    INFO(bad);
    CHECK_FALSE(ParseVersion(bad).ok());
  }
}

TEST_CASE("release: manifest parser rejects malformed input", "[release]") {
  REQUIRE(ParseManifest(ManifestText("1.0.0")).ok());
  const std::string h = std::string(64, 'a');
  for (
      const std::string& bad : std::vector<std::string>{
          std::string("not json"),
          std::string("[]"),
          std::string("{}"),
          R"({"version":"1.0.0","channel":"stable","expires":5,"artifacts":{}})",
          R"({"version":"1.0.0","channel":"Stable","expires":5,"artifacts":{"p":{"uri":"https://x","length":1,"sha256":")" +
              h + R"("}}})",
          R"({"version":"1.0.0","channel":"s","expires":5,"extra":1,"artifacts":{"p":{"uri":"https://x","length":1,"sha256":")" +
              h + R"("}}})",
          R"({"version":"1.0.0","channel":"s","expires":5,"artifacts":{"p":{"uri":"ftp://x","length":1,"sha256":")" +
              h + R"("}}})",
          R"({"version":"1.0.0","channel":"s","expires":5,"artifacts":{"p":{"uri":"https://x","length":0,"sha256":")" +
              h + R"("}}})",
          R"({"version":"1.0.0","channel":"s","expires":5,"artifacts":{"p":{"uri":"https://x","length":1,"sha256":"AB"}}})",
          R"({"version":"1.0.0","channel":"s","expires":"5","artifacts":{"p":{"uri":"https://x","length":1,"sha256":")" +
              h + R"("}}})",
          R"({"version":"1.0.0","channel":"s","expires":5,"artifacts":{"P/x":{"uri":"https://x","length":1,"sha256":")" +
              h + R"("}}})",
      }) {
    INFO(bad);
    CHECK(ParseManifest(bad).status().code() == Code::kInvalidArgument);
  }
  CHECK_FALSE(ParseEnvelope("{\"manifest\":\"x\",\"key_id\":\"00\",\"signature\":\"00\"}").ok());
  CHECK_FALSE(ParseEnvelope(std::string(100000, '{')).ok());
}

TEST_CASE("release: sign then verify round-trips through the envelope JSON", "[release]") {
  Result<KeyPair> kp = GenerateKeyPair();
  REQUIRE(kp.ok());
  Result<Envelope> e = SignManifest(kp->private_pem, ManifestText("1.2.3"));
  REQUIRE(e.ok());
  Result<Envelope> back = ParseEnvelope(EnvelopeToJson(e.value()));
  REQUIRE(back.ok());
  Result<Manifest> m = VerifyEnvelope(back.value(), RingOf(kp.value()));
  REQUIRE(m.ok());
  CHECK(m->version.ToString() == "1.2.3");
  CHECK(m->artifacts.at("linux-x86_64").length == 10);
  CHECK(CheckTrust(m.value(), std::nullopt, 1000).ok());
}

TEST_CASE("release: forged signature, tampered manifest and unknown key are refused", "[release]") {
  KeyPair kp = GenerateKeyPair().value();
  KeyPair other = GenerateKeyPair().value();
  Envelope e = SignManifest(kp.private_pem, ManifestText("1.2.3")).value();

  Envelope forged = e;
  forged.signature[5] ^= 0x01;
  CHECK(VerifyEnvelope(forged, RingOf(kp)).status().code() == Code::kPermissionDenied);

  Envelope tampered = e;
  tampered.manifest_text = ManifestText("9.9.9");
  CHECK(VerifyEnvelope(tampered, RingOf(kp)).status().code() == Code::kPermissionDenied);

  // Signed by a key that is not pinned.
  Envelope foreign = SignManifest(other.private_pem, ManifestText("1.2.3")).value();
  CHECK(VerifyEnvelope(foreign, RingOf(kp)).status().code() == Code::kPermissionDenied);
  // A foreign signature relabelled with the pinned key id still fails.
  foreign.key_id = e.key_id;
  CHECK(VerifyEnvelope(foreign, RingOf(kp)).status().code() == Code::kPermissionDenied);
}

TEST_CASE("release: rollback and freeze are refused", "[release]") {
  KeyPair kp = GenerateKeyPair().value();
  Manifest m =
      VerifyEnvelope(SignManifest(kp.private_pem, ManifestText("1.2.3", 5000)).value(), RingOf(kp))
          .value();
  CHECK(CheckTrust(m, ParseVersion("1.2.2").value(), 4999).ok());
  CHECK(CheckTrust(m, ParseVersion("1.2.3").value(), 100).code() == Code::kConflict);
  CHECK(CheckTrust(m, ParseVersion("2.0.0").value(), 100).code() == Code::kConflict);
  CHECK(CheckTrust(m, std::nullopt, 5000).code() == Code::kPermissionDenied);
}

TEST_CASE("release: key ring parsing", "[release]") {
  CHECK_FALSE(ParseKeyRing("").ok());
  CHECK_FALSE(ParseKeyRing("# only a comment\n").ok());
  CHECK_FALSE(ParseKeyRing("abcd\n").ok());
  KeyPair a = GenerateKeyPair().value(), b = GenerateKeyPair().value();
  Result<KeyRing> ring = ParseKeyRing(a.public_hex + "\r\n\n  " + b.public_hex + "  \n");
  REQUIRE(ring.ok());
  CHECK(ring->size() == 2);
}
