#include "shared/native/release_sign.h"

#include <openssl/evp.h>
#include <openssl/pem.h>

#include <memory>

#include "shared/sha256.h"

namespace gleaner::release {
namespace {

struct PkeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
struct CtxFree {
  void operator()(EVP_MD_CTX* p) const { EVP_MD_CTX_free(p); }
};
struct BioFree {
  void operator()(BIO* p) const { BIO_free(p); }
};
using Pkey = std::unique_ptr<EVP_PKEY, PkeyFree>;

Result<std::string> RawPublic(EVP_PKEY* key) {
  unsigned char raw[32];
  size_t len = sizeof(raw);
  if (EVP_PKEY_get_raw_public_key(key, raw, &len) != 1 || len != 32) {
    return Status::Internal("cannot read the Ed25519 public key");
  }
  return std::string(reinterpret_cast<char*>(raw), len);
}

}  // namespace

Result<KeyPair> GenerateKeyPair() {
  std::unique_ptr<EVP_PKEY_CTX, void (*)(EVP_PKEY_CTX*)> ctx(
      EVP_PKEY_CTX_new_id(EVP_PKEY_ED25519, nullptr), EVP_PKEY_CTX_free);
  EVP_PKEY* raw = nullptr;
  if (!ctx || EVP_PKEY_keygen_init(ctx.get()) != 1 || EVP_PKEY_keygen(ctx.get(), &raw) != 1) {
    return Status::Internal("Ed25519 key generation failed");
  }
  Pkey key(raw);
  std::unique_ptr<BIO, BioFree> bio(BIO_new(BIO_s_mem()));
  if (!bio ||
      PEM_write_bio_PrivateKey(bio.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return Status::Internal("cannot encode the private key");
  }
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  KeyPair kp;
  kp.private_pem.assign(data, size_t(n));
  Result<std::string> pub = RawPublic(key.get());
  if (!pub.ok()) return pub.status();
  kp.public_hex = HexEncode(pub->data(), pub->size());
  return kp;
}

Result<Envelope> SignManifest(const std::string& private_pem, const std::string& manifest_text) {
  Result<Manifest> m = ParseManifest(manifest_text);
  if (!m.ok()) return m.status();
  std::unique_ptr<BIO, BioFree> bio(BIO_new_mem_buf(private_pem.data(), int(private_pem.size())));
  Pkey key(bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!key || EVP_PKEY_id(key.get()) != EVP_PKEY_ED25519) {
    return Status::Invalid("the private key is not an Ed25519 PEM key");
  }
  std::string msg = SignedBytes(manifest_text);
  std::unique_ptr<EVP_MD_CTX, CtxFree> ctx(EVP_MD_CTX_new());
  unsigned char sig[64];
  size_t sig_len = sizeof(sig);
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, key.get()) != 1 ||
      EVP_DigestSign(ctx.get(), sig, &sig_len, reinterpret_cast<const unsigned char*>(msg.data()),
                     msg.size()) != 1 ||
      sig_len != 64) {
    return Status::Internal("Ed25519 signing failed");
  }
  Result<std::string> pub = RawPublic(key.get());
  if (!pub.ok()) return pub.status();
  Envelope e;
  e.manifest_text = manifest_text;
  e.key_id = KeyIdOf(pub.value());
  e.signature.assign(reinterpret_cast<char*>(sig), sig_len);
  return e;
}

Result<KeyRing> ParseKeyRing(const std::string& text) {
  KeyRing ring;
  size_t pos = 0;
  int line_no = 0;
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) {
      line.pop_back();
    }
    size_t first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#') continue;
    line = line.substr(first);
    std::string raw;
    if (line.size() != 64 || !HexDecode(line, &raw) || raw.size() != 32) {
      return Status::Invalid("key ring line " + std::to_string(line_no) +
                             ": expected 64 hex digits of an Ed25519 public key");
    }
    ring[KeyIdOf(raw)] = raw;
  }
  if (ring.empty()) return Status::Invalid("key ring holds no keys");
  return ring;
}

Result<Manifest> VerifyEnvelope(const Envelope& envelope, const KeyRing& ring) {
  auto it = ring.find(envelope.key_id);
  if (it == ring.end()) {
    return Status(Code::kPermissionDenied, "release signed by unknown key " + envelope.key_id);
  }
  Pkey key(EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr,
                                       reinterpret_cast<const unsigned char*>(it->second.data()),
                                       it->second.size()));
  std::unique_ptr<EVP_MD_CTX, CtxFree> ctx(EVP_MD_CTX_new());
  std::string msg = SignedBytes(envelope.manifest_text);
  if (!key || !ctx || EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, key.get()) != 1) {
    return Status::Internal("cannot set up Ed25519 verification");
  }
  if (envelope.signature.size() != 64 ||
      EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(envelope.signature.data()),
                       envelope.signature.size(),
                       reinterpret_cast<const unsigned char*>(msg.data()), msg.size()) != 1) {
    return Status(Code::kPermissionDenied, "release signature does not verify");
  }
  return ParseManifest(envelope.manifest_text);
}

Status CheckTrust(const Manifest& m, const std::optional<Version>& highest_trusted, int64_t now_s) {
  if (now_s >= m.expires) {
    return Status(Code::kPermissionDenied, "release manifest " + m.version.ToString() +
                                               " expired at " + std::to_string(m.expires));
  }
  if (highest_trusted && !(*highest_trusted < m.version)) {
    return Status::Conflict("release " + m.version.ToString() + " is not newer than " +
                            highest_trusted->ToString() + " (rollback refused)");
  }
  return Status::Ok();
}

}  // namespace gleaner::release
