// TlsCredentials: the coordinator's HTTPS certificate chain and private key (OpenSSL).
//
// Load() reads the PEM files given at construction: the certificate file holds the server
// certificate first, then any intermediates; the key file holds the matching private key.
// A failed Load() leaves the credentials loaded before in use, so a bad file on SIGHUP never
// takes the service down.
//
// ConfigureServerContext() prepares an SSL_CTX for serving: TLS 1.2 minimum, ECDHE key exchange
// with AEAD ciphers only for TLS 1.2 (TLS 1.3 suites are all AEAD), no renegotiation, no
// compression, and a certificate callback that gives each new handshake the credentials current
// at that moment. Reloading therefore affects new connections only; established ones keep the
// certificate they were made with.
//
// Threading: Load() and Info() from any thread; the callback runs on HTTP worker threads. The
// object must outlive every SSL_CTX configured with it.
#pragma once

#include <openssl/ssl.h>

#include <memory>
#include <mutex>
#include <string>

#include "shared/status.h"

namespace gleaner::native {

// What the logs say about the loaded certificate.
struct TlsCertInfo {
  std::string subject;    // one-line distinguished name
  std::string serial;     // hexadecimal
  std::string not_after;  // ISO-8601 UTC
  bool time_valid =
      true;  // false when expired or not yet valid (still served: the operator decides)
};

class TlsCredentials {
 public:
  TlsCredentials(std::string cert_path, std::string key_path);
  ~TlsCredentials();
  TlsCredentials(const TlsCredentials&) = delete;
  TlsCredentials& operator=(const TlsCredentials&) = delete;

  // (Re)reads the certificate chain and key; InvalidArgument naming the file on a bad or
  // mismatched file (the previous credentials stay in use).
  Status Load();

  // The currently served certificate (empty before the first successful Load()).
  TlsCertInfo Info() const;

  // Applies the protocol/cipher policy and installs the certificate callback. False (with the
  // OpenSSL reason in *error) if OpenSSL refuses a setting.
  bool ConfigureServerContext(SSL_CTX* ctx, std::string* error);

 private:
  struct Loaded;
  static int CertCallback(SSL* ssl, void* arg);
  std::shared_ptr<const Loaded> Current() const;

  std::string cert_path_, key_path_;
  mutable std::mutex mu_;
  std::shared_ptr<const Loaded> current_;
};

}  // namespace gleaner::native
