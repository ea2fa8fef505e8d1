#include "tests/integration/test_pki.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "tests/integration/harness.h"

namespace gleaner::testing {

namespace {

std::string LastOpenSslError() {
  unsigned long e, last = 0;
  while ((e = ERR_get_error()) != 0) last = e;
  if (last == 0) return "unknown OpenSSL error";
  char buf[256];
  ERR_error_string_n(last, buf, sizeof buf);
  return buf;
}

struct Deleter {
  void operator()(X509* x) const { X509_free(x); }
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
  void operator()(BIO* b) const { BIO_free(b); }
  void operator()(SSL_CTX* c) const { SSL_CTX_free(c); }
  void operator()(SSL* s) const { SSL_free(s); }
};
template <typename T>
using Ptr = std::unique_ptr<T, Deleter>;

bool AddExtension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (ext == nullptr) return false;
  bool ok = X509_add_ext(cert, ext, -1) == 1;
  X509_EXTENSION_free(ext);
  return ok;
}

// A certificate for `key`'s public half named `cn`; issuer == nullptr: self-signed.
Ptr<X509> MakeCert(EVP_PKEY* key, const std::string& cn, long serial, int64_t not_before_s,
                   int64_t not_after_s, X509* issuer, EVP_PKEY* issuer_key,
                   const std::vector<std::pair<int, std::string>>& extensions) {
  Ptr<X509> cert(X509_new());
  if (!cert) return nullptr;
  X509_set_version(cert.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), serial);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), long(not_before_s));
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), long(not_after_s));
  X509_set_pubkey(cert.get(), key);
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  X509* signer = issuer != nullptr ? issuer : cert.get();
  X509_set_issuer_name(cert.get(), X509_get_subject_name(signer));
  for (const auto& [nid, value] : extensions) {
    if (!AddExtension(cert.get(), signer, nid, value)) return nullptr;
  }
  if (X509_sign(cert.get(), issuer_key != nullptr ? issuer_key : key, EVP_sha256()) <= 0) {
    return nullptr;
  }
  return cert;
}

std::string CertPem(X509* cert) {
  Ptr<BIO> bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_X509(bio.get(), cert);
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, size_t(n));
}

std::string KeyPem(EVP_PKEY* key) {
  Ptr<BIO> bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr);
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, size_t(n));
}

}  // namespace

struct TestCa::Impl {
  Ptr<EVP_PKEY> key;
  Ptr<X509> cert;
};

TestCa::TestCa(const std::string& name) : impl_(std::make_unique<Impl>()) {
  impl_->key.reset(EVP_EC_gen("P-256"));
  if (!impl_->key) {
    error_ = "CA key: " + LastOpenSslError();
    return;
  }
  impl_->cert = MakeCert(impl_->key.get(), name, 1, -86400, 30 * 86400, nullptr, nullptr,
                         {{NID_basic_constraints, "critical,CA:TRUE"},
                          {NID_key_usage, "critical,keyCertSign,cRLSign"},
                          {NID_subject_key_identifier, "hash"}});
  if (!impl_->cert) error_ = "CA certificate: " + LastOpenSslError();
}

TestCa::~TestCa() = default;

bool TestCa::WriteCert(const std::string& path) const {
  return impl_->cert && WriteFile(path, CertPem(impl_->cert.get()));
}

bool TestCa::Issue(const CertSpec& spec, const std::string& cert_path, const std::string& key_path,
                   std::string* error) const {
  if (!impl_->cert) {
    *error = error_;
    return false;
  }
  Ptr<EVP_PKEY> key(EVP_EC_gen("P-256"));
  if (!key) {
    *error = "key: " + LastOpenSslError();
    return false;
  }
  std::string san;
  for (const std::string& ip : spec.ip_addresses) san += (san.empty() ? "IP:" : ",IP:") + ip;
  for (const std::string& dns : spec.dns_names) san += (san.empty() ? "DNS:" : ",DNS:") + dns;
  std::vector<std::pair<int, std::string>> ext = {{NID_basic_constraints, "critical,CA:FALSE"},
                                                  {NID_key_usage, "critical,digitalSignature"},
                                                  {NID_ext_key_usage, "serverAuth"},
                                                  {NID_authority_key_identifier, "keyid"}};
  if (!san.empty()) ext.emplace_back(NID_subject_alt_name, san);
  Ptr<X509> cert = MakeCert(key.get(), spec.common_name, spec.serial, spec.not_before_s,
                            spec.not_after_s, impl_->cert.get(), impl_->key.get(), ext);
  if (!cert) {
    *error = "certificate: " + LastOpenSslError();
    return false;
  }
  if (!WriteFile(cert_path, CertPem(cert.get())) || !WriteFile(key_path, KeyPem(key.get()))) {
    *error = "cannot write " + cert_path + " or " + key_path;
    return false;
  }
  return true;
}

TlsProbeResult ProbeTls(int port, const TlsProbeOptions& options) {
  TlsProbeResult out;
  ERR_clear_error();
  Ptr<SSL_CTX> ctx(SSL_CTX_new(TLS_client_method()));
  if (!ctx) {
    out.error = LastOpenSslError();
    return out;
  }
  if (options.max_version != 0) {
    // Let this client offer old protocols at all (OpenSSL 3 refuses them at level 1+).
    SSL_CTX_set_security_level(ctx.get(), 0);
    SSL_CTX_set_min_proto_version(ctx.get(), 0);
    SSL_CTX_set_max_proto_version(ctx.get(), options.max_version);
    SSL_CTX_set_cipher_list(ctx.get(), "DEFAULT:@SECLEVEL=0");
  }
  if (!options.tls12_ciphers.empty() &&
      SSL_CTX_set_cipher_list(ctx.get(), options.tls12_ciphers.c_str()) != 1) {
    out.error = "cipher list: " + LastOpenSslError();
    return out;
  }
  if (!options.ca_file.empty()) {
    if (SSL_CTX_load_verify_locations(ctx.get(), options.ca_file.c_str(), nullptr) != 1) {
      out.error = "CA file: " + LastOpenSslError();
      return out;
    }
    SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
  }
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) {
    out.error = "socket failed";
    return out;
  }
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(uint16_t(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    out.error = "connect failed";
    return out;
  }
  Ptr<SSL> ssl(SSL_new(ctx.get()));
  SSL_set_fd(ssl.get(), fd);
  if (!options.ca_file.empty())
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl.get()), "127.0.0.1");
  if (SSL_connect(ssl.get()) != 1) {
    out.error = LastOpenSslError();
  } else {
    out.ok = true;
    out.version = SSL_get_version(ssl.get());
    if (X509* peer = SSL_get1_peer_certificate(ssl.get())) {
      if (BIGNUM* bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(peer), nullptr)) {
        char* hex = BN_bn2hex(bn);
        out.serial = hex;
        OPENSSL_free(hex);
        BN_free(bn);
      }
      X509_free(peer);
    }
    SSL_shutdown(ssl.get());
  }
  ssl.reset();
  close(fd);
  return out;
}

}  // namespace gleaner::testing
