#include "coordinator/native/http/tls.h"

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <cstdio>
#include <ctime>
#include <vector>

namespace gleaner::native {

namespace {

// TLS 1.2 suites: forward-secret key exchange and authenticated encryption only.
constexpr const char* kTls12Ciphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

// The most recent OpenSSL error as text (and the queue cleared).
std::string OpenSslError() {
  unsigned long e = ERR_get_error();
  unsigned long last = e;
  while (e != 0) {
    last = e;
    e = ERR_get_error();
  }
  if (last == 0) return "unknown OpenSSL error";
  char buf[256];
  ERR_error_string_n(last, buf, sizeof buf);
  return buf;
}

struct BioCloser {
  void operator()(BIO* b) const { BIO_free(b); }
};
using BioPtr = std::unique_ptr<BIO, BioCloser>;

std::string FormatAsn1Time(const ASN1_TIME* t) {
  struct tm tm = {};
  if (t == nullptr || ASN1_TIME_to_tm(t, &tm) != 1) return "";
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

struct TlsCredentials::Loaded {
  X509* leaf = nullptr;
  STACK_OF(X509) * chain = nullptr;  // intermediates, may be empty
  EVP_PKEY* key = nullptr;
  TlsCertInfo info;
  ~Loaded() {
    X509_free(leaf);
    sk_X509_pop_free(chain, X509_free);
    EVP_PKEY_free(key);
  }
};

TlsCredentials::TlsCredentials(std::string cert_path, std::string key_path)
    : cert_path_(std::move(cert_path)), key_path_(std::move(key_path)) {}

TlsCredentials::~TlsCredentials() = default;

Status TlsCredentials::Load() {
  ERR_clear_error();
  auto loaded = std::make_shared<Loaded>();
  {
    BioPtr bio(BIO_new_file(cert_path_.c_str(), "r"));
    if (!bio) return Status::Invalid("--tls-cert: cannot read " + cert_path_);
    loaded->leaf = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr);
    if (loaded->leaf == nullptr) {
      return Status::Invalid("--tls-cert: no PEM certificate in " + cert_path_ + " (" +
                             OpenSslError() + ")");
    }
    loaded->chain = sk_X509_new_null();
    while (X509* extra = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
      sk_X509_push(loaded->chain, extra);
    }
    ERR_clear_error();  // the loop ends on "no start line" at the end of the file
  }
  {
    BioPtr bio(BIO_new_file(key_path_.c_str(), "r"));
    if (!bio) return Status::Invalid("--tls-key: cannot read " + key_path_);
    loaded->key = PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr);
    if (loaded->key == nullptr) {
      return Status::Invalid("--tls-key: no unencrypted PEM private key in " + key_path_ + " (" +
                             OpenSslError() + ")");
    }
  }
  if (X509_check_private_key(loaded->leaf, loaded->key) != 1) {
    ERR_clear_error();
    return Status::Invalid("--tls-key: " + key_path_ + " does not match the certificate in " +
                           cert_path_);
  }

  TlsCertInfo& info = loaded->info;
  char subject[512];
  X509_NAME_oneline(X509_get_subject_name(loaded->leaf), subject, sizeof subject);
  info.subject = subject;
  if (BIGNUM* bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(loaded->leaf), nullptr)) {
    if (char* hex = BN_bn2hex(bn)) {
      info.serial = hex;
      OPENSSL_free(hex);
    }
    BN_free(bn);
  }
  info.not_after = FormatAsn1Time(X509_get0_notAfter(loaded->leaf));
  info.time_valid = X509_cmp_current_time(X509_get0_notBefore(loaded->leaf)) < 0 &&
                    X509_cmp_current_time(X509_get0_notAfter(loaded->leaf)) > 0;

  std::lock_guard<std::mutex> lock(mu_);
  current_ = std::move(loaded);
  return Status::Ok();
}

std::shared_ptr<const TlsCredentials::Loaded> TlsCredentials::Current() const {
  std::lock_guard<std::mutex> lock(mu_);
  return current_;
}

TlsCertInfo TlsCredentials::Info() const {
  auto cur = Current();
  return cur ? cur->info : TlsCertInfo{};
}

int TlsCredentials::CertCallback(SSL* ssl, void* arg) {
  auto cur = static_cast<TlsCredentials*>(arg)->Current();
  if (!cur) return 0;  // fails the handshake
  // Each call takes its own references: the SSL keeps them after a later reload frees `cur`.
  if (SSL_use_certificate(ssl, cur->leaf) != 1 || SSL_use_PrivateKey(ssl, cur->key) != 1 ||
      SSL_set1_chain(ssl, cur->chain) != 1) {
    return 0;
  }
  return 1;
}

bool TlsCredentials::ConfigureServerContext(SSL_CTX* ctx, std::string* error) {
  ERR_clear_error();
  auto fail = [&](const char* what) {
    *error = std::string(what) + ": " + OpenSslError();
    return false;
  };
  if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1) return fail("TLS minimum version");
  if (SSL_CTX_set_cipher_list(ctx, kTls12Ciphers) != 1) return fail("TLS 1.2 ciphers");
  SSL_CTX_set_options(
      ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  SSL_CTX_set_cert_cb(ctx, &TlsCredentials::CertCallback, this);
  return true;
}

}  // namespace gleaner::native
